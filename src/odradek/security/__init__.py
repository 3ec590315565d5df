"""Broker security: who a connection is (``principal``), how it authenticates (TLS, SASL),
what it may do (``acls``, ``authorizer``) and where the ACLs are kept (``acl_store``)."""
