import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same RNG state, so failures reproduce."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """Run a test on one torch thread, then restore the setting. For modules of tiny
    models: one thread is fastest, and on a busy machine two threads wait on each
    other. Use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    """A new run starts a new site report (see write_report in test_site.py)."""
    if not _is_xdist_worker(session.config):
        import shutil

        from test_site import ROWS

        shutil.rmtree(ROWS, ignore_errors=True)


def pytest_sessionfinish(session):
    """Write the site report once every worker has finished its pages."""
    if not _is_xdist_worker(session.config):
        from test_site import write_report

        write_report()
