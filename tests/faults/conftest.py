"""Fault drills: each case breaks something under a running batch and checks that every episode is
recorded (success, failure, task error or infra-failed) and the run goes on. Fixtures: tests/conftest.py."""
