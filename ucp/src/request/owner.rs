//! What an owned-tier request holds until [`crate::Worker::take`] gives
//! it back: a buffer or datatype value of any type.
//!
//! `Vec<u8>`, the buffer most callers move in, is kept in the request
//! itself; any other type is boxed. Holding a byte vector then costs no
//! allocation, which on a shared-memory ping-pong of small messages is a
//! fair part of what an owned receive costs over a borrowed one.

use std::any::Any;

/// An owned-tier request's buffer or value.
#[derive(Debug)]
pub(crate) enum Owner {
    Bytes(Vec<u8>),
    Boxed(Box<dyn Any + Send>),
}

impl Owner {
    /// `data`, held.
    #[inline]
    pub(crate) fn new<D: Send + 'static>(data: D) -> Owner {
        let mut slot = Some(data);
        if let Some(v) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Vec<u8>>>() {
            if let Some(v) = v.take() {
                return Owner::Bytes(v);
            }
        }
        match slot {
            Some(d) => Owner::Boxed(Box::new(d)),
            // Taken above only when it was a vector.
            None => Owner::Bytes(Vec::new()),
        }
    }

    /// Whether it holds a `D`.
    #[inline]
    pub(crate) fn is<D: 'static>(&self) -> bool {
        match self {
            Owner::Bytes(_) => std::any::TypeId::of::<D>() == std::any::TypeId::of::<Vec<u8>>(),
            Owner::Boxed(b) => b.is::<D>(),
        }
    }

    /// The held value, if it is a `D`; else the owner back.
    #[inline]
    pub(crate) fn take<D: 'static>(self) -> Result<D, Owner> {
        match self {
            Owner::Bytes(v) => {
                let mut slot = Some(v);
                match (&mut slot as &mut dyn Any).downcast_mut::<Option<D>>() {
                    Some(d) => d.take().ok_or(Owner::Bytes(Vec::new())),
                    None => Err(Owner::Bytes(slot.unwrap_or_default())),
                }
            }
            Owner::Boxed(b) => b.downcast::<D>().map(|d| *d).map_err(Owner::Boxed),
        }
    }

    /// The held value, to be downcast in place.
    pub(crate) fn as_any_mut(&mut self) -> &mut (dyn Any + Send) {
        match self {
            Owner::Bytes(v) => v,
            Owner::Boxed(b) => b.as_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Owner;

    #[test]
    fn bytes_stay_inline_and_other_types_are_boxed() {
        let o = Owner::new(vec![1u8, 2, 3]);
        assert!(matches!(o, Owner::Bytes(_)));
        assert!(o.is::<Vec<u8>>() && !o.is::<Vec<u16>>());
        let o = match o.take::<Vec<u16>>() {
            Err(o) => o,
            Ok(_) => panic!("a byte vector taken as Vec<u16>"),
        };
        assert_eq!(o.take::<Vec<u8>>().unwrap(), vec![1, 2, 3]);

        let mut o = Owner::new((7u32, String::from("x")));
        assert!(matches!(o, Owner::Boxed(_)));
        assert!(o.is::<(u32, String)>() && !o.is::<Vec<u8>>());
        o.as_any_mut()
            .downcast_mut::<(u32, String)>()
            .expect("in place")
            .0 = 8;
        let o = o.take::<Vec<u8>>().unwrap_err();
        assert_eq!(o.take::<(u32, String)>().unwrap(), (8, "x".to_string()));

        let mut o = Owner::new(vec![5u8]);
        o.as_any_mut()
            .downcast_mut::<Vec<u8>>()
            .expect("in place")
            .push(6);
        assert_eq!(o.take::<Vec<u8>>().unwrap(), vec![5, 6]);
    }
}
