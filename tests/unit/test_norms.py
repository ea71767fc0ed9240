import pytest
import torch

from rankcollapse.core import norms


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
    torch.testing.assert_close(norms.apply_norm(X, "layernorm"),
                               torch.nn.functional.layer_norm(X, (6,), eps=1e-5))
    centred = X - X.mean(-1, keepdim=True)
    torch.testing.assert_close(norms.apply_norm(X, "layernorm"),
                               centred / torch.sqrt(centred.var(-1, unbiased=False, keepdim=True) + 1e-5))


def test_none_is_the_identity_and_unknown_names_are_refused():
    X = _x()
    assert norms.apply_norm(X, "none") is X
    with pytest.raises(ValueError, match="norm must be one of none, unit, rms, layernorm"):
        norms.apply_norm(X, "sphere")


def test_trained_layernorm_is_torch_layernorm_with_its_affine():
    X = _x()
    gen = torch.Generator().manual_seed(4)
    w, b = (torch.randn(6, generator=gen, dtype=torch.float64),
            torch.randn(6, generator=gen, dtype=torch.float64))
    got = norms.apply_trained_norm(X, norms.TrainedNorm("layernorm", w, b, 1e-12))
    torch.testing.assert_close(got, torch.nn.functional.layer_norm(X, (6,), w, b, eps=1e-12))
    centred = X - X.mean(-1, keepdim=True)
    torch.testing.assert_close(got, centred / centred.pow(2).mean(-1, keepdim=True).add(1e-12).sqrt() * w + b)


def test_trained_rms_norm_multiplies_by_its_gain():
    X, g = _x(), torch.linspace(0.5, 2.0, 6, dtype=torch.float64)
    got = norms.apply_trained_norm(X, norms.TrainedNorm("rms", g, None, 1e-6))
    torch.testing.assert_close(got, X / torch.sqrt(X.pow(2).mean(-1, keepdim=True) + 1e-6) * g)


def test_fresh_layernorm_is_layernorm_without_affine():
    X = _x()
    torch.testing.assert_close(norms.apply_trained_norm(X, norms.fresh_layernorm(6)),
                               norms.apply_norm(X, "layernorm"), rtol=0, atol=0)


def test_model_norm_needs_weights_and_bad_trained_norms_are_refused():
    assert "model" in norms.NORM_NAMES and "model" not in norms.FIXED_NORM_NAMES
    with pytest.raises(ValueError, match="norm must be one of none, unit, rms, layernorm; got 'model'"):
        norms.apply_norm(_x(), "model")
    with pytest.raises(ValueError, match="kind"):
        norms.TrainedNorm("batchnorm", torch.ones(6))
    with pytest.raises(ValueError, match="weight must be"):
        norms.TrainedNorm("layernorm", torch.ones(6), torch.zeros(5))
