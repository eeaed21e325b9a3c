"""Real servers for the tests: Redis and target processes on 127.0.0.1, ephemeral ports."""
