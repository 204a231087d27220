//! Printing a function as text.
