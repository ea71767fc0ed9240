import pytest
import torch

from rankcollapse import norms


def _x() -> torch.Tensor:
    return torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def test_unit_norm_puts_every_token_on_the_unit_sphere():
    norm = torch.linalg.vector_norm(norms.apply_norm(_x(), "unit"), dim=-1)
    torch.testing.assert_close(norm, torch.ones(2, 4, dtype=torch.float64))


def test_rms_norm_gives_norm_sqrt_d():
    norm = torch.linalg.vector_norm(norms.apply_norm(_x(), "rms"), dim=-1)
    torch.testing.assert_close(norm, torch.full((2, 4), 6**0.5, dtype=torch.float64))


def test_layernorm_matches_torch_without_affine():
    X = _x()
    torch.testing.assert_close(norms.apply_norm(X, "layernorm"), torch.nn.functional.layer_norm(X, (6,), eps=1e-5))
    centred = X - X.mean(-1, keepdim=True)
    torch.testing.assert_close(norms.apply_norm(X, "layernorm"), centred / torch.sqrt(centred.var(-1, unbiased=False, keepdim=True) + 1e-5))


def test_none_is_the_identity_and_unknown_names_are_refused():
    X = _x()
    assert norms.apply_norm(X, "none") is X
    with pytest.raises(ValueError, match="norm must be one of none, unit, rms, layernorm"):
        norms.apply_norm(X, "sphere")
