"""Every 4xx in French (for people) and English (for developers), never a 500 for bad input."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.schemas import ErrorBody

__all__ = ["MESSAGES", "ApiError", "install_error_handlers"]

MESSAGES: dict[str, tuple[str, str]] = {
    "empty_message": ("Le message est vide.", "The message is empty."),
    "message_too_long": (
        "Le message est trop long ({limit} caractères au plus).",
        "The message is too long (at most {limit} characters).",
    ),
    "control_characters": (
        "Le message contient des caractères de contrôle.",
        "The message contains control characters.",
    ),
    "invalid_text": ("Le texte n'est pas valide.", "The text is not valid."),
    "invalid_json": (
        "Le corps de la requête n'est pas du JSON valide.",
        "The body is not valid JSON.",
    ),
    "invalid_encoding": (
        "Le corps de la requête n'est pas de l'UTF-8 valide.",
        "The body is not valid UTF-8.",
    ),
    "invalid_request": ("La requête n'est pas valide.", "The request is not valid."),
    "body_too_large": (
        "La requête est trop volumineuse ({limit} octets au plus).",
        "The request body is too large (at most {limit} bytes).",
    ),
    "unauthorized": (
        "Jeton d'accès manquant, inconnu ou révoqué.",
        "Missing, unknown or revoked access token.",
    ),
    "not_found": ("Introuvable.", "Not found."),
    "idempotency_conflict": (
        "Cet identifiant de message (client_message_id) a déjà servi pour un autre message "
        "dans cette conversation : envoyez ce message avec un nouvel identifiant.",
        "This client_message_id was already used for another message in this conversation: "
        "send this message with a new id.",
    ),
    "storage_unavailable": (
        "Le stockage est momentanément indisponible ; réessayez dans quelques secondes.",
        "Storage is unavailable for the moment; retry in a few seconds.",
    ),
    "too_many_turns": (
        "Deux messages de cet appareil sont déjà en cours : attendez leur réponse avant "
        "d'en envoyer un autre. Si quelqu'un est en danger maintenant, appelez le 112.",
        "This device already has two messages in progress: wait for their answers before "
        "sending another.",
    ),
    "method_not_allowed": ("Méthode non autorisée.", "Method not allowed."),
    "body_timeout": (
        "Le corps de la requête arrive trop lentement : la connexion est fermée. Réessayez.",
        "The request body arrived too slowly: the connection is closed. Retry.",
    ),
    "header_timeout": (
        "La requête arrive trop lentement : la connexion est fermée. Réessayez.",
        "The request arrived too slowly: the connection is closed. Retry.",
    ),
    "too_many_connections": (
        "Le service reçoit trop de connexions ; réessayez dans {retry_after_s} secondes.",
        "The service has too many connections; retry in {retry_after_s} seconds.",
    ),
    "too_many_failed_logins": (
        "Trop de jetons d'accès refusés depuis cette adresse ; réessayez dans "
        "{retry_after_s} secondes.",
        "Too many access tokens refused from this address; retry in {retry_after_s} seconds.",
    ),
    "unsupported_media_type": (
        "Le corps doit être du JSON (Content-Type: application/json).",
        "The body must be JSON (Content-Type: application/json).",
    ),
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        **values: Any,
    ) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.field = field
        self.headers = headers
        self.values = values


def error_response(
    status: int,
    code: str,
    field: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    safety: Any = None,
    **values: Any,
) -> JSONResponse:
    french, english = MESSAGES.get(code, MESSAGES["invalid_request"])
    body = ErrorBody(
        code=code,
        message_fr=french.format(**values),
        message_en=english.format(**values),
        field=field,
        details=details,
        safety=safety,
        retry_after_s=values.get("retry_after_s"),
    )
    error = body.model_dump(mode="json", exclude_none=True)
    return JSONResponse({"error": error}, status, headers=headers)


def _validation(request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    first = errors[0] if errors else {}
    kind = str(first.get("type", ""))
    location = [str(p) for p in first.get("loc", ()) if p != "body"]
    field = ".".join(location) or None
    if kind == "json_invalid":
        return error_response(400, "invalid_json")
    message = str(first.get("msg", ""))
    for code in ("empty_message", "control_characters", "invalid_text"):
        if code in message:
            return error_response(422, code, field)
    # Never echo the input back: the details keep the place and the kind of each error.
    details = [
        {"field": ".".join(str(p) for p in e.get("loc", ())), "type": e.get("type")} for e in errors
    ]
    return error_response(422, "invalid_request", field, details)


def _http(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, StarletteHTTPException):  # pragma: no cover - registered for it
        return error_response(400, "invalid_request")
    codes = {
        401: "unauthorized",
        404: "not_found",
        405: "method_not_allowed",
        415: "unsupported_media_type",
    }
    code = codes.get(
        exc.status_code, "invalid_encoding" if exc.status_code == 400 else "invalid_request"
    )
    headers = dict(exc.headers or {})
    return error_response(exc.status_code, code, headers=headers or None)


def _api(request: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, ApiError):  # pragma: no cover - registered for it
        return error_response(400, "invalid_request")
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    if exc.status == 503:
        headers = {"Retry-After": "5"}
    if exc.headers:
        headers = {**(headers or {}), **exc.headers}
    return error_response(exc.status, exc.code, exc.field, headers=headers, **exc.values)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(ApiError, _api)
