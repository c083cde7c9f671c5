"""Shared pytest configuration."""


def pytest_configure(config):
    # Tests that run the real Deeploy compiler (seconds each); select with -m deeploy, skip with -m "not deeploy".
    config.addinivalue_line("markers", "deeploy: runs the real Deeploy front/mid/back end")
