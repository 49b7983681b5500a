//! The in-process `self` transport.
