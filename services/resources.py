"""The API endpoints of services, declared (config.resources): list, register, detail, delete, lease
override, converter profile, workers; the profile presets."""

from __future__ import annotations

from functools import partial

from drf_spectacular.utils import OpenApiParameter
from rest_framework import status

from config.api.deletions import RESULT_FILES_HEADERS, ConfirmSerializer, result_files_headers
from config.resources import Action, Read
from services import actions
from services import serializers as s
from services.queries import service_get, service_list, worker_list

ServicesRead = partial(Read, tag="services")
ServiceAction = partial(Action, tag="services", answer=s.ServiceSerializer)

SERVICE = "services/<str:service>"

service_list_read = ServicesRead(
    route="services", name="api-services",
    operation_id="services_list", summary="List registered services",
    answer=s.ServiceSerializer, many=True, problems=(), fetch=lambda query: service_list(),
)  # fmt: skip
service_register = ServiceAction(
    route="services", name="api-services", method="post",
    operation_id="services_register", summary="Register a service (creates no tasks)",
    request=s.ServiceRegisterRequestSerializer, status=status.HTTP_201_CREATED, problems=(400, 409),
    act=lambda view, request: actions.service_register(
        actor=view.actor_name(), submitted=s.ServiceRegisterRequestSerializer(data=request.data)
    ),
)  # fmt: skip
service_detail = ServicesRead(
    route=SERVICE, name="api-service",
    operation_id="services_retrieve", summary="One service",
    answer=s.ServiceSerializer, fetch=lambda query, service: service_get(service),
)  # fmt: skip
service_delete = ServiceAction(
    route=SERVICE, name="api-service", method="delete",
    operation_id="services_destroy",
    summary="Delete a service with all its tasks, messages and result archives in every corpus (confirm=name)",
    parameters=(
        OpenApiParameter("confirm", str, required=False, description="must equal the service name"),
        *RESULT_FILES_HEADERS,
    ),
    answer=None, status=status.HTTP_204_NO_CONTENT, problems=(400, 403, 404), headers=result_files_headers,
    act=lambda view, request, service: actions.service_delete(
        name=service, actor=view.actor_name(), submitted=ConfirmSerializer(data=request.query_params)
    ),
)  # fmt: skip
service_lease = ServiceAction(
    route=f"{SERVICE}/lease", name="api-service-lease", method="put",
    operation_id="services_lease_update",
    summary="Set (positive seconds) or clear (null) the service's lease override",
    request=s.LeaseUpdateRequestSerializer, problems=(400, 404),
    act=lambda view, request, service: actions.service_lease_set(
        name=service, actor=view.actor_name(), submitted=lambda: s.lease_request(service, request.data)
    ),
)  # fmt: skip
service_profile = ServiceAction(
    route=f"{SERVICE}/profile", name="api-service-profile", method="put",
    operation_id="services_profile_update",
    summary="Give the service a converter profile: options over a preset; tasks handed out from now on get it",
    request=s.ProfileSerializer, problems=(400, 403, 404),
    act=lambda view, request, service: actions.service_profile_set(
        name=service, actor=view.actor_name(), submitted=s.ProfileSerializer(data=request.data)
    ),
)  # fmt: skip
workers = ServicesRead(
    route=f"{SERVICE}/workers", name="api-service-workers",
    operation_id="services_workers",
    summary="The workers of a service: dispatched, returned, in flight, first and last seen; from their heartbeats"
    " conversions, peak resident size, kills by reason, the latest heartbeat, the engine and its version",
    answer=s.WorkerSerializer, many=True, fetch=lambda query, service: worker_list(service),
)  # fmt: skip
presets = ServicesRead(
    route="profiles", name="api-profiles",
    operation_id="profiles_list", summary="The converter profile presets a service may take by name",
    answer=s.PresetSerializer, many=True, problems=(), fetch=lambda query: s.preset_records(),
)  # fmt: skip
