"""Security: who a connection is (``principal``), what it may do (``acls``, ``authorizer``)
and where the ACLs are kept (``acl_store``)."""
