"""Queries and keys in one picture (app.maths.attribution.qk_map) against a PCA worked another way: the
eigenvectors of the joint covariance matrix of a real head's q and k (NumPy's eigh, not the SVD the app uses)."""

from __future__ import annotations

import numpy as np
import pytest

from app.maths.attribution import qk_map
from app.maths.decoder_files import load_decoder_files
from app.maths.llama import head_at, run_decoder


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (17, 6), (29, 8)])
def test_the_projection_equals_the_covariances_eigenvectors(layer: int, head: int) -> None:
    model = load_decoder_files()
    run = run_decoder(model, "The cat sat on the mat because it was tired. The cat")
    heads = head_at(model, run, layer)
    q, k = heads.q[head], heads.k[model.config.kv_head(head)]
    qs, ks, explained = qk_map(q, k)
    both = np.concatenate([q, k]).astype(np.float64)
    centred = both - both.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred / len(both))  # ascending
    top = vectors[:, ::-1][:, :2]  # (d_k, 2): the two largest
    expected = centred @ top
    for axis in range(2):  # an eigenvector's sign is free: compare up to it
        got = np.concatenate([qs, ks])[:, axis]
        sign = np.sign(got @ expected[:, axis])
        np.testing.assert_allclose(got, sign * expected[:, axis], atol=1e-6 * np.abs(expected).max())
    np.testing.assert_allclose(explained, values[::-1][:2] / values.sum(), rtol=1e-6)
    assert explained[0] >= explained[1] > 0 and explained.sum() <= 1 + 1e-12
