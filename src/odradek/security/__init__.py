"""Broker security: principals, authentication (TLS, SASL) and authorization."""
