"""bench bridge: mail between nodes over NATS JetStream, in its own asyncio process."""
