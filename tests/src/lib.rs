//! Shared helpers for the conformance suites.
