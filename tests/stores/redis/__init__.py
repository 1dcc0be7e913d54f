"""Tests of the Redis store alone."""
