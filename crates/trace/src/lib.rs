//! Tracer.
