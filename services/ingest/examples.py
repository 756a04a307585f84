"""The example bodies the API documents (the OpenAPI page) and the isolation test sends to
every route, one place for both routers."""

EXAMPLE_FACT = {
    "content": "The staging API listens on port 8443",
    "category": "environment",
    "source": {"kind": "file", "location": "deploy/staging.yaml:14"},
    "quote": "listen: 8443",
    "origin": "verified",
    "tags": ["staging", "api", "port", "端口"],
    "questions": ["Which port does the staging API listen on?", "预发环境的 API 用哪个端口？"],
}
