import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow],
    derandomize=False, print_blob=True,
)
settings.register_profile("thorough", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default"))


def pytest_collection_modifyitems(config, items):
    """Files that hold slow tests run first (order kept within a file and within each group): with
    ``-n 2 --dist loadfile`` a long broker or Spark file then starts while the many short files fill
    the other worker, rather than running alone at the end of the suite."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)
