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
    max_blocks: int = 4  # transformer blocks stacked
    max_d_ff: int = 256  # the FFN's hidden size

    @property
    def max_form_fields(self) -> int:
        """The most fields the page's form can hold: every matrix of inputs at its largest, the mask
        grid, tokens, and a hundred settings."""
        d, t, dh, ff = self.max_d_model, self.max_tokens, self.max_d_head, self.max_d_ff
        return (3 * t * d + t * t + 2 * t  # x, source, position table; the mask grid; tokens
                + 4 * d * dh + 3 * dh * dh + dh  # one head's W_Q, W_K, W_V, W_O rows and score weights
                + 2 * d * ff + ff + 5 * d + 100)  # the first block's FFN and LayerNorms; settings

    @property
    def max_body_bytes(self) -> int:
        """The largest valid JSON request, with room to spare: 32 bytes a number plus 64 KiB."""
        h, d, t, dh, ff = self.max_heads, self.max_d_model, self.max_tokens, self.max_d_head, self.max_d_ff
        numbers = (3 * t * d + t * t  # x, context, position table, mask
                   + 3 * h * d * dh + h * dh * d  # W_Q, W_K, W_V, W_O
                   + 3 * h * dh * dh + h * dh  # W_a, W₁, W₂, v_a
                   + 2 * d * ff + ff + 5 * d)  # the first block's FFN and LayerNorms
        return numbers * 32 + 64 * 1024


settings = Settings()
