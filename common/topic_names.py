"""The names of the topics logflume itself writes, defined once for the broker, the
agent's kafka sink and the tools.

Kafka's internal topics: `__consumer_offsets` (the group coordinator's committed
offsets and group metadata), `__transaction_state` (the transaction coordinator's
log) and `__share_group_state` (the share coordinator's share-partition states).
Only the coordinators write them; Metadata marks them internal.

The agent's topics, ordinary topics on any Kafka-compatible cluster: the kafka sink
commits the positions of its exactly-once deliveries to `logflume-positions` (a
compacted topic keyed by transactional id) unless `positions_topic` says otherwise,
sends records a broker refuses for good to `<topic>.dlq` unless
`dead_letter_topic` names another topic, and publishes its audit totals to
`logflume-audit` (as the Spark jobs do) unless `audit_topic` says otherwise.

Here rather than in broker/ because the agent must not import the broker.
"""

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
SHARE_GROUP_STATE = "__share_group_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE})


def is_internal(name: str) -> bool:
    """Kafka's internal topics only: other names starting with "__" are ordinary."""
    return name in INTERNAL_TOPICS


POSITIONS_TOPIC = "logflume-positions"
AUDIT_TOPIC = "logflume-audit"  # the audit's tiers publish their totals here (common/audit.py)
DEAD_LETTER_SUFFIX = ".dlq"


def dead_letter_topic(topic: str) -> str:
    """The default dead-letter topic of records meant for `topic`."""
    return topic + DEAD_LETTER_SUFFIX
