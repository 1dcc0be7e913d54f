"""A job's encrypted arguments, decrypted on demand for a user allowed to read them.

The pages show an encrypted job's payload as stored: "[encrypted]" where each
encrypted argument was. A user with the permission `laterite_django.view_job_arguments`
gets a link on the job's (or the failed job's) page to a page with them decrypted;
each such view is logged on "laterite.admin" with the user and the job.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path

from .. import encryption, payload

__all__ = ["ARGUMENTS_PERMISSION", "DecryptedArguments"]

logger = logging.getLogger("laterite.admin")

ARGUMENTS_PERMISSION = "laterite_django.view_job_arguments"


def is_encrypted(text: str) -> bool:
    """Whether a stored payload holds encrypted arguments."""
    return f'"{payload.SEALED_KEY}":' in text


class DecryptedArguments:
    """The arguments view of a job admin (JobAdmin, FailedJobAdmin)."""

    admin_site: Any
    model: Any

    def get_urls(self) -> list:
        opts = self.model._meta
        return [
            path("<path:object_id>/arguments/",
                 self.admin_site.admin_view(self.arguments_view),
                 name=f"{opts.app_label}_{opts.model_name}_arguments"),
            *super().get_urls(),  # type: ignore[misc]
        ]

    def arguments_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Show one job's arguments decrypted, to a user with the permission; logged."""
        if not request.user.has_perm(ARGUMENTS_PERMISSION):
            raise PermissionDenied("Reading encrypted arguments needs the permission "
                                   f"{ARGUMENTS_PERMISSION}.")
        obj = get_object_or_404(self.get_queryset(request), pk=object_id)  # type: ignore[attr-defined]
        logger.info("User %s (#%s) viewed the decrypted arguments of %s #%s", request.user,
                    request.user.pk, self.model._meta.verbose_name, obj.pk,
                    extra={"action": "arguments_viewed", "user_id": request.user.pk,
                           "job_id": obj.pk, "model": self.model._meta.model_name})
        try:
            args, kwargs, _ = encryption.open_arguments(obj.payload)
            shown, problem = json.dumps({"args": args, "kwargs": kwargs}, indent=2,
                                        ensure_ascii=False), ""
        except Exception as e:
            shown, problem = "", f"{type(e).__name__}: {e}"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta, "title": f"Arguments of {obj}", "object": obj,
            "arguments": shown, "problem": problem,
            "change_url": self.object_url("change", obj),  # type: ignore[attr-defined]
        }
        return TemplateResponse(request, "laterite_django/admin/arguments.html", context)

    def render_change_form(self, request: HttpRequest, context: dict, add: bool = False,
                           change: bool = False, form_url: str = "", obj: Any = None
                           ) -> HttpResponse:
        if obj is not None and is_encrypted(obj.payload):
            context["arguments_encrypted"] = True
            if request.user.has_perm(ARGUMENTS_PERMISSION):
                context["arguments_url"] = self.object_url("arguments", obj)  # type: ignore[attr-defined]
        return super().render_change_form(  # type: ignore[misc]
            request, context, add, change, form_url, obj)
