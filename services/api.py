"""API of services: list, register, detail, delete, lease override, converter profile; the profile presets."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_base import TokenApiView
from config.api.deletions import RESULT_FILES_HEADERS, ConfirmSerializer, result_files_headers
from config.api.schema import problems
from services import actions
from services.queries import service_get, service_list, worker_list
from services.serializers import (
    LeaseUpdateRequestSerializer,
    PresetSerializer,
    ProfileSerializer,
    ServiceRegisterRequestSerializer,
    ServiceSerializer,
    WorkerSerializer,
    lease_request,
    preset_records,
)


class ServiceListApi(TokenApiView):
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
        service = actions.service_register(
            actor=self.actor_name(), submitted=ServiceRegisterRequestSerializer(data=request.data)
        )
        return Response(ServiceSerializer(service).data, status=status.HTTP_201_CREATED)


class ServiceDetailApi(TokenApiView):
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
        counts = actions.service_delete(
            name=service, actor=self.actor_name(), submitted=ConfirmSerializer(data=request.query_params)
        )
        return Response(status=status.HTTP_204_NO_CONTENT, headers=result_files_headers(counts))


class ServiceLeaseApi(TokenApiView):
    @extend_schema(
        operation_id="services_lease_update",
        summary="Set (positive seconds) or clear (null) the service's lease override",
        request=LeaseUpdateRequestSerializer,
        responses={200: ServiceSerializer, **problems(400, 404)},
        tags=["services"],
    )
    def put(self, request: Request, service: str) -> Response:
        updated = actions.service_lease_set(
            name=service, actor=self.actor_name(), submitted=lambda: lease_request(service, request.data)
        )
        return Response(ServiceSerializer(updated).data)


class ServiceProfileApi(TokenApiView):
    @extend_schema(
        operation_id="services_profile_update",
        summary="Give the service a converter profile: options over a preset; tasks handed out from now on get it",
        request=ProfileSerializer,
        responses={200: ServiceSerializer, **problems(400, 403, 404)},
        tags=["services"],
    )
    def put(self, request: Request, service: str) -> Response:
        updated = actions.service_profile_set(
            name=service, actor=self.actor_name(), submitted=ProfileSerializer(data=request.data)
        )
        return Response(ServiceSerializer(updated).data)


class ProfilePresetsApi(TokenApiView):
    @extend_schema(
        operation_id="profiles_list",
        summary="The converter profile presets a service may take by name",
        responses={200: PresetSerializer(many=True)},
        tags=["services"],
    )
    def get(self, request: Request) -> Response:
        return Response(PresetSerializer(preset_records(), many=True).data)


class WorkerListApi(TokenApiView):
    @extend_schema(
        operation_id="services_workers",
        summary="The workers of a service: dispatched, returned, in flight, first and last seen; from their heartbeats"
        " conversions, peak resident size, kills by reason, the latest heartbeat, the engine and its version",
        responses={200: WorkerSerializer(many=True), **problems(404)},
        tags=["services"],
    )
    def get(self, request: Request, service: str) -> Response:
        return Response(WorkerSerializer(worker_list(service), many=True).data)
