"""A small OpenAPI 3.0 document that exercises what the converter and connector must handle."""

from __future__ import annotations

from typing import Any

PETSTORE: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://{host}/v1", "variables": {"host": {"default": "pets.example"}}}],
    "paths": {
        "/pets/{pet-id}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {
                "operationId": "getPet",
                "summary": "Get a pet",
                "description": "Returns one pet by id.",
                "parameters": [
                    {
                        "name": "fields",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                        "explode": False,
                    },
                    {
                        "name": "X-Trace",
                        "in": "header",
                        "schema": {"type": "string"},
                        "description": "Trace id.",
                    },
                    {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    },
                    "404": {"description": "missing"},
                },
            },
            "delete": {
                "operationId": "deletePet",
                "responses": {"204": {"description": "gone"}},
            },
            "put": {
                "operationId": "replacePet",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
                "responses": {"200": {"description": "ok"}},
            },
        },
        "/pets": {
            "get": {
                "operationId": "getPet",  # duplicate operationId
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "integer"},
                    },
                    {
                        "name": "filter",
                        "in": "query",
                        "style": "deepObject",
                        "schema": {"type": "object"},
                    },
                    {
                        "name": "tags",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/Pet"},
                                }
                            }
                        },
                    }
                },
            },
            "post": {
                "summary": "Create a pet",
                "requestBody": {"$ref": "#/components/requestBodies/NewPet"},
                "responses": {
                    "201": {
                        "description": "created",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                        },
                    }
                },
            },
        },
        "/pets/{pet-id}/photo": {
            "post": {
                "operationId": "uploadPhoto",
                "parameters": [{"$ref": "#/components/parameters/PetId"}],
                "requestBody": {
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/search": {
            "post": {
                "operationId": "search",
                "parameters": [{"name": "name", "in": "query", "schema": {"type": "string"}}],
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {"type": "object", "properties": {"name": {"type": "string"}}}
                        }
                    }
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/forms": {
            "post": {
                "operationId": "submitForm",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "email": {"type": "string"},
                                    "metadata": {"type": "object"},
                                    "expand": {"type": "array", "items": {"type": "string"}},
                                },
                                "required": ["email"],
                            }
                        }
                    },
                },
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
    "components": {
        "parameters": {
            "PetId": {
                "name": "pet-id",
                "in": "path",
                "required": True,
                "description": "The pet's id.",
                "schema": {"type": "string"},
            },
        },
        "requestBodies": {
            "NewPet": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "allOf": [
                                {"$ref": "#/components/schemas/NewPet"},
                                {
                                    "type": "object",
                                    "properties": {
                                        "owner": {"$ref": "#/components/schemas/Person"}
                                    },
                                },
                            ]
                        }
                    }
                },
            }
        },
        "schemas": {
            "NewPet": {
                "type": "object",
                "x-internal": "dropped",
                "properties": {
                    "name": {"type": "string", "description": "Pet name."},
                    "tag": {"type": "string", "nullable": True},
                },
                "required": ["name"],
            },
            "Pet": {
                "allOf": [
                    {"$ref": "#/components/schemas/NewPet"},
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                    },
                ],
            },
            "Person": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "friends": {"type": "array", "items": {"$ref": "#/components/schemas/Person"}},
                },
            },
        },
    },
}
