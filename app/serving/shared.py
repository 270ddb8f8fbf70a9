"""Finished answers shared between servers through Redis (``REDIS_URL``), and a short lock per question, so that a
question computed on one server is not computed again on another while its answer is kept.

An answer is kept under its key for ``seconds`` and counted in bytes: a script adds it, forgets what has expired,
and takes the oldest away while the answers kept are over ``budget`` bytes, all in one step. The lock is Redis's
``SET NX PX``: the server that takes it computes, the others wait for the answer to appear (or for the lock to
lapse, when its holder died, and then take it themselves).

Redis is a help here, never a need: an error or a timeout reads as "not kept" and "not locked", and for
``PAUSE_SECONDS`` after one this server does not ask Redis at all, so the real models' pages go on without it
(a class needs it; a student alone does not).
"""

from __future__ import annotations

import time

import redis.asyncio as redis
from redis.exceptions import RedisError

PREFIX = "attention:answer:"
INDEX = "attention:answers"  # a sorted set: each kept answer's key, scored by when it expires
SIZES = "attention:answer-sizes"  # a hash: each kept answer's size in bytes
TOTAL = "attention:answer-bytes"  # the bytes kept, in all
LOCK_PREFIX = "attention:computing:"
CONNECTIONS = 16  # per worker: an answer is one GET or one script
PAUSE_SECONDS = 5.0  # after an error, Redis is left alone this long

# KEYS: the answer, the index, the sizes, the total. ARGV: the bytes, their size, now (ms), expiry (ms), budget.
PUT_SCRIPT = """
local now, ttl, budget, size = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, k in ipairs(gone) do
  redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', KEYS[3], k) or '0'))
  redis.call('HDEL', KEYS[3], k)
  redis.call('ZREM', KEYS[2], k)
end
if size > budget then return 0 end
local before = redis.call('HGET', KEYS[3], KEYS[1])
if before then redis.call('DECRBY', KEYS[4], tonumber(before)) end
local total = tonumber(redis.call('INCRBY', KEYS[4], size))
while total > budget do
  local oldest = redis.call('ZPOPMIN', KEYS[2])
  if #oldest == 0 then break end
  total = tonumber(redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', KEYS[3], oldest[1]) or '0')))
  redis.call('HDEL', KEYS[3], oldest[1])
  redis.call('DEL', oldest[1])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('HSET', KEYS[3], KEYS[1], size)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
return total
"""


class SharedAnswers:
    """Answers as bytes in Redis, at most ``budget`` bytes, each kept ``seconds``."""

    def __init__(self, url: str, *, budget: int, seconds: int, timeout: float = 0.5) -> None:
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=CONNECTIONS, timeout=timeout,
                                                     socket_timeout=timeout, socket_connect_timeout=timeout)
        self.redis = redis.Redis.from_pool(pool)
        self.budget, self.seconds = budget, seconds
        self._put = self.redis.register_script(PUT_SCRIPT)
        self.paused_until = 0.0

    def _usable(self) -> bool:
        return time.monotonic() >= self.paused_until

    def _pause(self) -> None:
        self.paused_until = time.monotonic() + PAUSE_SECONDS

    async def get(self, key: str) -> bytes | None:
        if not self._usable():
            return None
        try:
            return await self.redis.get(PREFIX + key)
        except RedisError:
            self._pause()
            return None

    async def put(self, key: str, value: bytes) -> None:
        if not self._usable() or len(value) > self.budget:
            return
        try:
            now_ms = int(time.time() * 1000)
            await self._put(keys=[PREFIX + key, INDEX, SIZES, TOTAL],
                            args=[value, len(value), now_ms, self.seconds * 1000, self.budget])
        except RedisError:
            self._pause()

    async def lock(self, key: str, seconds: float) -> bool:
        """Whether this server takes the question: True when Redis cannot be asked (each server then computes)."""
        if not self._usable():
            return True
        try:
            return bool(await self.redis.set(LOCK_PREFIX + key, b"1", nx=True, px=int(seconds * 1000)))
        except RedisError:
            self._pause()
            return True

    async def unlock(self, key: str) -> None:
        if not self._usable():
            return
        try:
            await self.redis.delete(LOCK_PREFIX + key)
        except RedisError:
            self._pause()

    async def locked(self, key: str) -> bool:
        if not self._usable():
            return False
        try:
            return bool(await self.redis.exists(LOCK_PREFIX + key))
        except RedisError:
            self._pause()
            return False

    async def kept_bytes(self) -> int:
        """The bytes of answers kept, in all (for tests and the benches)."""
        return int(await self.redis.get(TOTAL) or 0)

    async def close(self) -> None:
        await self.redis.aclose()
