"""OpenAPI post-processing: declare the error answers every endpoint can give.

Every operation may answer 401 (no credentials) and 403 (no permission); one with query
parameters 400 (a bad parameter, named in the body); one with a path parameter 404. The
bodies are the JSON DRF writes: {"detail": "..."} or {"parameter": "message" | ["message"]}.
"""

ERROR_SCHEMA = {
    "type": "object",
    "description": "What was wrong: `detail`, or a message per parameter",
    "additionalProperties": {
        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    },
}


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def declare_errors(result, generator, request, public):
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            params = operation.get("parameters", [])
            responses.setdefault("401", _error("Not signed in"))
            responses.setdefault("403", _error("Signed in without the permission"))
            if any(p.get("in") == "query" for p in params) or "requestBody" in operation:
                responses.setdefault("400", _error("A bad parameter, named in the body"))
            if any(p.get("in") == "path" for p in params):
                responses.setdefault("404", _error("No such object"))
    return result
