"""One settings object. Every default works with no environment at all; ATTENTION_* variables override."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ATTENTION_", frozen=True)

    # Input bounds: the only place they are stated. The API schema, the page form and README follow.
    max_tokens: int = 64  # T (and later S) at most
    max_d_model: int = 64
    max_heads: int = 8
    max_d_head: int = 64  # d_k and d_v at most
    max_abs_value: float = 1000.0  # |every number a client sends| at most
    max_token_chars: int = 40
    max_seed: int = 2**32 - 1

    @property
    def max_body_bytes(self) -> int:
        """The largest valid JSON request, with room to spare: 32 bytes a number plus 64 KiB."""
        h, d, t, dh = self.max_heads, self.max_d_model, self.max_tokens, self.max_d_head
        numbers = 3 * t * d + t * t + 3 * h * d * dh + h * dh * d  # x, context, position table, mask, weights
        return numbers * 32 + 64 * 1024


settings = Settings()
