"""API of services: list, register, detail, delete, lease override."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import TokenApiView
from accounts.journal import Action
from config.api.deletions import RESULT_FILES_HEADERS, ConfirmSerializer, result_files_headers
from config.api.schema import problems
from services import actions
from services.queries import service_get, service_list, worker_list
from services.serializers import (
    LeaseUpdateRequestSerializer,
    ServiceRegisterRequestSerializer,
    ServiceSerializer,
    WorkerSerializer,
)


class ServiceListApi(TokenApiView):
    audit_action = Action.SERVICE_REGISTER

    @extend_schema(
        operation_id="services_list",
        summary="List registered services",
        responses={200: ServiceSerializer(many=True)},
        tags=["services"],
    )
    def get(self, request: Request) -> Response:
        return Response(ServiceSerializer(service_list(), many=True).data)

    @extend_schema(
        operation_id="services_register",
        summary="Register a service (creates no tasks)",
        request=ServiceRegisterRequestSerializer,
        responses={201: ServiceSerializer, **problems(400, 409)},
        tags=["services"],
    )
    def post(self, request: Request) -> Response:
        body = ServiceRegisterRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        service = actions.service_register(actor=self.actor_name(), **body.validated_data)
        return Response(ServiceSerializer(service).data, status=status.HTTP_201_CREATED)

    def audit_target(self, kwargs: dict) -> str:
        return self.body_field("name")


class ServiceDetailApi(TokenApiView):
    audit_action = Action.SERVICE_DELETE

    @extend_schema(
        operation_id="services_retrieve",
        summary="One service",
        responses={200: ServiceSerializer, **problems(404)},
        tags=["services"],
    )
    def get(self, request: Request, service: str) -> Response:
        return Response(ServiceSerializer(service_get(service)).data)

    @extend_schema(
        operation_id="services_destroy",
        summary="Delete a service with all its tasks, messages and result archives in every corpus (confirm=name)",
        parameters=[
            OpenApiParameter("confirm", str, required=False, description="must equal the service name"),
            *RESULT_FILES_HEADERS,
        ],
        responses={204: None, **problems(400, 403, 404)},
        tags=["services"],
    )
    def delete(self, request: Request, service: str) -> Response:
        params = ConfirmSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        counts = actions.service_delete(
            name=service, confirm=params.validated_data.get("confirm"), actor=self.actor_name()
        )
        return Response(status=status.HTTP_204_NO_CONTENT, headers=result_files_headers(counts))


class ServiceLeaseApi(TokenApiView):
    audit_action = Action.SERVICE_LEASE

    @extend_schema(
        operation_id="services_lease_update",
        summary="Set (positive seconds) or clear (null) the service's lease override",
        request=LeaseUpdateRequestSerializer,
        responses={200: ServiceSerializer, **problems(400, 404)},
        tags=["services"],
    )
    def put(self, request: Request, service: str) -> Response:
        service_get(service)  # 404 before 400: an unknown service is the first thing to say
        body = LeaseUpdateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        updated = actions.service_lease_set(
            name=service, seconds=body.validated_data["seconds"], actor=self.actor_name()
        )
        return Response(ServiceSerializer(updated).data)


class WorkerListApi(TokenApiView):
    @extend_schema(
        operation_id="services_workers",
        summary="The workers of a service: dispatched, returned, in flight, first and last seen",
        responses={200: WorkerSerializer(many=True), **problems(404)},
        tags=["services"],
    )
    def get(self, request: Request, service: str) -> Response:
        return Response(WorkerSerializer(worker_list(service), many=True).data)
