//! iWARP wire formats.
