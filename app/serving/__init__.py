"""The real models served: one service per model, single flights, fair queues, caches bounded in bytes."""
