"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and its group state.

assignors.py  the server-side assignors, `uniform` (sticky, balanced) and `range`
reconcile.py  a member's way from its current assignment to its target, revoking
              before assigning (Kafka's CurrentAssignmentBuilder)
group.py      ConsumerGroup and ConsumerMember: epochs, subscriptions, the target
              assignment and which member holds each partition
records.py    the group's records in `__consumer_offsets` (Kafka's key versions
              3 to 8), so that a new coordinator resumes the group
regex.py      server-side regular expression subscriptions (RE2 syntax)
heartbeat.py  ConsumerGroups: the heartbeat, leaves, session and rebalance
              timeouts, offset-commit checks and the describe views
classic.py    classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a
              consumer group
embedded.py   the consumer's embedded protocol (ConsumerProtocolSubscription and
              ConsumerProtocolAssignment) the classic members speak
migration.py  online upgrade of a classic group and downgrade of a consumer group
              (group.consumer.migration.policy)
"""
