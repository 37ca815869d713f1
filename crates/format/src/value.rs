//! Reading field values out of an event's payload.
