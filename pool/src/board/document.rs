//! A board row written straight to its JSON document, with no `serde_json::Value` in between:
//! the lane's state document as `clawpool state` prints it (`StateView::to_json`: the file's
//! fields with `lane_status` as shown, `is_ready` false for a lost supervisor, `last_status`
//! and the supervisor's liveness added) and the board's own `board` object. At 1,000 lanes the
//! tree of values built and dropped per row was a large share of a board's CPU.
//!
//! The state document's fields are the lanes crate's (`WorkerStateDoc`'s derived `Serialize`,
//! extra fields of newer writers included): the row passes them through one by one and
//! replaces only those the view shows otherwise, so a field added to the state file reaches
//! the board with no change here.

use std::fmt::Display;

use clawpool_lanes::state_file::{ShownStatus, Supervisor};
use clawpool_lanes::{StateView, wire_name};
use serde::Serialize;
use serde::ser::{self, Impossible, SerializeMap, Serializer};

use super::printed::Spans;

/// The entry a board row adds after the state document's: the board's own facts.
pub(super) const BOARD_ENTRY: &str = "board";
/// The entries a row has that its state document has not.
pub(super) const ROW_ONLY_ENTRIES: [&str; 2] = [LAST_STATUS, BOARD_ENTRY];
/// The lane's own status, written after the document's fields.
const LAST_STATUS: &str = "last_status";

/// The fields of `view`'s document, as `StateView::to_json` shows them, written into `map`
/// (an open JSON object); the caller adds its own fields and closes it.
/// With `spans`, the places of the entries that move with the clock are marked as the row's
/// text is written ([`super::printed`]).
pub(super) fn write_view<M: SerializeMap>(
    view: &StateView,
    map: &mut M,
    spans: Option<&Spans>,
) -> Result<(), M::Error> {
    view.doc.serialize(Fields { map, view, spans })?;
    map.serialize_entry(LAST_STATUS, &wire_name(&view.doc.status))
}

/// The supervisor as a reader shows it: the file's, with its liveness.
#[derive(Serialize)]
pub(super) struct ShownSupervisor<'a> {
    #[serde(flatten)]
    pub(super) file: &'a Supervisor,
    pub(super) lost: bool,
    pub(super) seconds_since_heartbeat: u64,
}

/// A serializer that takes only the state document's map and writes its entries into the
/// row's open map, replacing the shown ones.
struct Fields<'a, M> {
    map: &'a mut M,
    view: &'a StateView,
    spans: Option<&'a Spans>,
}

/// The entries of the state document, each passed to the row's map.
struct Entries<'a, M> {
    map: &'a mut M,
    view: &'a StateView,
    spans: Option<&'a Spans>,
    key: Option<String>,
}

impl<M: SerializeMap> Entries<'_, M> {
    fn entry<V: Serialize + ?Sized>(&mut self, key: &str, value: &V) -> Result<(), M::Error> {
        let start = self.spans.map(Spans::at);
        self.write_entry(key, value)?;
        if let (Some(spans), Some(start)) = (self.spans, start) {
            spans.entry(key, start);
        }
        Ok(())
    }

    fn write_entry<V: Serialize + ?Sized>(&mut self, key: &str, value: &V) -> Result<(), M::Error> {
        let view = self.view;
        match key {
            "lane_status" => self.map.serialize_entry(key, &view.status),
            "is_ready" if view.status == ShownStatus::SupervisorLost => {
                self.map.serialize_entry(key, &false)
            }
            "supervisor" => self.map.serialize_entry(
                key,
                &ShownSupervisor {
                    file: &view.doc.supervisor,
                    lost: view.supervisor_lost,
                    seconds_since_heartbeat: view.seconds_since_heartbeat,
                },
            ),
            // Written by the row itself, after the document's fields.
            LAST_STATUS => Ok(()),
            _ => self.map.serialize_entry(key, value),
        }
    }
}

impl<M: SerializeMap> SerializeMap for Entries<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), M::Error> {
        self.key = Some(key_name(key)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), M::Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| ser::Error::custom("a state field's value came before its name"))?;
        self.entry(&key, value)
    }

    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), M::Error> {
        let key = key_name(key)?;
        self.entry(&key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

impl<M: SerializeMap> ser::SerializeStruct for Entries<'_, M> {
    type Ok = ();
    type Error = M::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        self.entry(key, value)
    }

    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

/// Refuses what a state document never is (anything but a map or a struct).
fn not_a_map<E: ser::Error>() -> E {
    E::custom("a lane's state document is a JSON object")
}

macro_rules! refuse {
    ($($name:ident($($arg:ty),*);)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<Self::Ok, Self::Error> {
            Err(not_a_map())
        })*
    };
}

impl<'a, M: SerializeMap> Serializer for Fields<'a, M> {
    type Ok = ();
    type Error = M::Error;
    type SerializeSeq = Impossible<(), M::Error>;
    type SerializeTuple = Impossible<(), M::Error>;
    type SerializeTupleStruct = Impossible<(), M::Error>;
    type SerializeTupleVariant = Impossible<(), M::Error>;
    type SerializeMap = Entries<'a, M>;
    type SerializeStruct = Entries<'a, M>;
    type SerializeStructVariant = Impossible<(), M::Error>;

    fn serialize_map(self, _: Option<usize>) -> Result<Entries<'a, M>, M::Error> {
        Ok(Entries {
            map: self.map,
            view: self.view,
            spans: self.spans,
            key: None,
        })
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Entries<'a, M>, M::Error> {
        self.serialize_map(None)
    }

    refuse! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_u8(u8); serialize_u16(u16); serialize_u32(u32);
        serialize_u64(u64); serialize_f32(f32); serialize_f64(f64); serialize_char(char);
        serialize_str(&str); serialize_bytes(&[u8]); serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), M::Error> {
        Err(not_a_map())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<(), M::Error> {
        Err(not_a_map())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), M::Error> {
        Err(not_a_map())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, M::Error> {
        Err(not_a_map())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, M::Error> {
        Err(not_a_map())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, M::Error> {
        Err(not_a_map())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, M::Error> {
        Err(not_a_map())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, M::Error> {
        Err(not_a_map())
    }
    fn collect_str<T: Display + ?Sized>(self, _: &T) -> Result<(), M::Error> {
        Err(not_a_map())
    }
}

/// Takes a map key's name (the state document's keys are strings), with the row's
/// serializer's error type `E`.
struct KeyName<E>(std::marker::PhantomData<E>);

fn key_name<T: Serialize + ?Sized, E: ser::Error>(key: &T) -> Result<String, E> {
    key.serialize(KeyName(std::marker::PhantomData))
}

fn not_a_string_key<E: ser::Error>() -> E {
    E::custom("a lane's state document has only string keys")
}

macro_rules! refuse_key {
    ($($name:ident($($arg:ty),*);)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<String, E> {
            Err(not_a_string_key())
        })*
    };
}

impl<E: ser::Error> Serializer for KeyName<E> {
    type Ok = String;
    type Error = E;
    type SerializeSeq = Impossible<String, E>;
    type SerializeTuple = Impossible<String, E>;
    type SerializeTupleStruct = Impossible<String, E>;
    type SerializeTupleVariant = Impossible<String, E>;
    type SerializeMap = Impossible<String, E>;
    type SerializeStruct = Impossible<String, E>;
    type SerializeStructVariant = Impossible<String, E>;

    fn serialize_str(self, name: &str) -> Result<String, E> {
        Ok(name.to_owned())
    }

    refuse_key! {
        serialize_bool(bool); serialize_i8(i8); serialize_i16(i16); serialize_i32(i32);
        serialize_i64(i64); serialize_u8(u8); serialize_u16(u16); serialize_u32(u32);
        serialize_u64(u64); serialize_f32(f32); serialize_f64(f64); serialize_char(char);
        serialize_bytes(&[u8]); serialize_none(); serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, E> {
        Err(not_a_string_key())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, E> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, E> {
        Err(not_a_string_key())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, E> {
        Err(not_a_string_key())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, E> {
        Err(not_a_string_key())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, E> {
        Err(not_a_string_key())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, E> {
        Err(not_a_string_key())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, E> {
        Err(not_a_string_key())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, E> {
        Err(not_a_string_key())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, E> {
        Err(not_a_string_key())
    }
}
