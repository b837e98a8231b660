"""Authorization: Kafka's ACL model (acl), the authorizer holding the bindings
(authorizer) and where they are stored (acl_store)."""
