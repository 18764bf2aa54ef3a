"""A strong-lensing likelihood built with herculens (PyPI): the model-heavy suite of
``benchmarks/real_suites.py --suite lensing``. Two tests, each building a lens image (an
elliptical power-law mass, external shear and six satellites; seven source and two lens-light
profiles; PSF convolution and supersampling) and compiling its chi-square: a
``value_and_grad`` in one, a ``jit`` and a second derivative in the other. Seconds of tracing
and lowering per test and a few large modules, unlike the many small jits of optax's tests.

Mass profiles that go through herculens's NIE (SIS, SIE) are left out: it calls
``jnp.clip(a_max=...)``, which newer jax no longer takes.
"""

from __future__ import annotations

import herculens as hcl
import jax
import jax.numpy as jnp
import numpy as np

SATELLITES = 6
EXTRA_SOURCES = 4


def lens_image(
    npix: int = 60,
    supersampling: int = 3,
    satellites: int = SATELLITES,
    extra_sources: int = EXTRA_SOURCES,
) -> hcl.LensImage:
    pixel = 0.08
    half = npix * pixel / 2
    grid = hcl.PixelGrid(
        nx=npix,
        ny=npix,
        ra_at_xy_0=-half + pixel / 2,
        dec_at_xy_0=-half + pixel / 2,
        transform_pix2angle=np.eye(2) * pixel,
    )
    return hcl.LensImage(
        grid,
        hcl.PSF(psf_type="GAUSSIAN", fwhm=0.3, pixel_size=pixel),
        noise_class=hcl.Noise(npix, npix, background_rms=1e-2, exposure_time=1000.0),
        lens_mass_model_class=hcl.MassModel(["EPL", "SHEAR"] + ["EPL"] * satellites),
        source_model_class=hcl.LightModel(
            ["SERSIC_ELLIPSE", "SERSIC_ELLIPSE", "GAUSSIAN_ELLIPSE"]
            + ["SERSIC_ELLIPSE"] * extra_sources
        ),
        lens_light_model_class=hcl.LightModel(["SERSIC_ELLIPSE", "SERSIC_ELLIPSE"]),
        kwargs_numerics={"supersampling_factor": supersampling},
    )


def epl(theta_e: float, x: float, y: float, gamma: float = 2.0) -> dict[str, float]:
    return {"theta_E": theta_e, "gamma": gamma, "e1": 0.0, "e2": 0.0, "center_x": x, "center_y": y}


def kw_lens(satellites: int = SATELLITES) -> list[dict[str, float]]:
    return [
        {"theta_E": 1.2, "gamma": 2.05, "e1": 0.1, "e2": -0.05, "center_x": 0.0, "center_y": 0.0},
        {"gamma1": 0.03, "gamma2": -0.02, "ra_0": 0.0, "dec_0": 0.0},
    ] + [epl(0.05 + 0.01 * i, 0.3 * i - 0.9, 0.7 - 0.2 * i) for i in range(satellites)]


def sersic(amp: float, radius: float, n: float, x: float, y: float) -> dict[str, float]:
    return {"amp": amp, "R_sersic": radius, "n_sersic": n, "e1": 0.05, "e2": 0.0,
            "center_x": x, "center_y": y}  # fmt: skip


def kw_source(extra_sources: int = EXTRA_SOURCES) -> list[dict[str, float]]:
    return [
        sersic(10.0, 0.2, 2.0, 0.05, 0.1),
        sersic(5.0, 0.1, 1.0, -0.1, 0.0),
        {"amp": 2.0, "sigma": 0.1, "e1": 0.0, "e2": 0.1, "center_x": 0.2, "center_y": -0.1},
    ] + [sersic(1.0, 0.05 + 0.01 * i, 1.5, 0.1 * i, -0.05) for i in range(extra_sources)]


KW_LENS = kw_lens()
KW_SOURCE = kw_source()
KW_LENS_LIGHT = [sersic(8.0, 1.0, 3.0, 0.0, 0.0), sersic(3.0, 0.4, 1.0, 0.0, 0.0)]


def chi_square(image: hcl.LensImage, data: jax.Array):  # type: ignore[no-untyped-def]
    def loss(kw_lens, kw_source, kw_lens_light):  # type: ignore[no-untyped-def]
        model = image.model(
            kwargs_lens=kw_lens, kwargs_source=kw_source, kwargs_lens_light=kw_lens_light
        )
        return jnp.sum((model - data) ** 2) / 1e-4

    return loss


def observed(
    image: hcl.LensImage,
    scale: float,
    lens: list[dict[str, float]] = KW_LENS,
    source: list[dict[str, float]] = KW_SOURCE,
) -> jax.Array:
    """The image of the true model (`lens`, `source`) times `scale`: the data to fit."""
    truth = image.model(kwargs_lens=lens, kwargs_source=source, kwargs_lens_light=KW_LENS_LIGHT)
    return truth * scale


def radius_gradient_of(loss, source=KW_SOURCE):  # type: ignore[no-untyped-def]
    """The chi-square's derivative in the main lens's Einstein radius, as a function of the
    lens masses: differentiated again, the curvature the second-derivative test compiles."""

    def einstein_radius_gradient(kw_lens):  # type: ignore[no-untyped-def]
        return jax.grad(loss)(kw_lens, source, KW_LENS_LIGHT)[0]["theta_E"]

    return einstein_radius_gradient


def test_likelihood_value_and_grad() -> None:
    image = lens_image()
    loss = chi_square(image, observed(image, 1.01))
    value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(
        KW_LENS, KW_SOURCE, KW_LENS_LIGHT
    )
    assert value.shape == ()
    assert len(grads[0]) == len(KW_LENS)


def test_likelihood_jit_and_second_derivative() -> None:
    image = lens_image(npix=50, supersampling=2)
    loss = chi_square(image, observed(image, 0.99))
    value = jax.jit(loss)(KW_LENS, KW_SOURCE, KW_LENS_LIGHT)

    curvature = jax.jit(jax.grad(radius_gradient_of(loss)))(KW_LENS)
    assert value.shape == ()
    assert len(curvature) == len(KW_LENS)
