"""The rule of tests/conftest.py for tests that read ../shared: a missing path skips them with the
path as the reason, and fails them under GOOSE_REQUIRE_SHARED=1 (what .ci/run sets)."""

from __future__ import annotations

import pytest

from tests.conftest import REQUIRE_SHARED_ENV, ROOT, require_shared, shared_required

pytest_plugins = ("pytester",)


def test_a_missing_shared_path_skips_locally_and_fails_in_ci(tmp_path, monkeypatch):
    missing = tmp_path / "shared" / "data" / "absent.jsonl"
    monkeypatch.delenv(REQUIRE_SHARED_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="absent.jsonl is missing"):
        require_shared(missing)
    for value in ("1", "true"):
        monkeypatch.setenv(REQUIRE_SHARED_ENV, value)
        with pytest.raises(pytest.fail.Exception, match="absent.jsonl is missing.*needs ../shared"):
            require_shared(missing)
    monkeypatch.setenv(REQUIRE_SHARED_ENV, "0")
    assert not shared_required()
    present = tmp_path / "here.txt"
    present.write_text("x")
    assert require_shared(present) == present


def test_ci_requires_shared():
    assert f"export {REQUIRE_SHARED_ENV}=1" in (ROOT / ".ci" / "run").read_text()


def test_a_needs_shared_marker_fails_the_test_under_ci(pytester, monkeypatch):
    pytester.makeconftest("from tests.conftest import pytest_configure, pytest_runtest_setup  # noqa: F401\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.needs_shared("/nonexistent/shared/reference.csv")
        def test_reads_shared():
            pass
        """
    )
    monkeypatch.delenv(REQUIRE_SHARED_ENV, raising=False)
    pytester.runpytest_inprocess().assert_outcomes(skipped=1)
    monkeypatch.setenv(REQUIRE_SHARED_ENV, "1")
    pytester.runpytest_inprocess().assert_outcomes(errors=1)
