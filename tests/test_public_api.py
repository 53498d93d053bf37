"""The public API: every exported name resolves, and the errors a caller must catch are there."""

from __future__ import annotations

import plaudit
from plaudit import errors


def test_every_exported_name_resolves() -> None:
    for name in plaudit.__all__:
        assert getattr(plaudit, name) is not None, name


def test_every_error_class_is_exported() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.PlauditError)
    }
    assert defined <= set(plaudit.__all__)
    assert plaudit.StoreNotFoundError.exit_code == 2
    assert issubclass(plaudit.MissingExtraError, plaudit.ConfigError)
