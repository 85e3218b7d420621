//! Python objects from the library's serde views, without JSON text in between.
//!
//! Every JSON object of sockstat's documents becomes a `sockstat.Record` (a `dict` whose keys
//! also read as attributes) or one of its documented subclasses, chosen by the name of the Rust
//! struct that serializes it; arrays become lists, numbers ints or floats, `null` `None`. A field
//! a view leaves out (`skip_serializing_if`) is absent here too, so a Record compares equal to
//! the command's JSON object for the same socket.
//!
//! [`Builder`] is a serde serializer that makes the Python objects directly. It makes each key
//! string once per call (and short values such as `"tcp"`, `"LISTEN"` or a command name, up to
//! a bound), so 100,000 sockets do not cost a million string allocations and hashes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;
use serde::ser::{self, Serialize};

/// Rust struct names (the library's views) and the `sockstat._records` class each becomes.
/// A struct not listed becomes a plain `Record`; `tests/test_sockets.py` checks the classes of
/// the listing's objects, so a renamed struct is noticed.
const CLASSES: &[(&str, &str)] = &[
    ("JsonSocket", "Socket"),
    ("JsonEndpoint", "Endpoint"),
    ("JsonOwner", "Owner"),
    ("JsonTimer", "Timer"),
    ("JsonCgroup", "Cgroup"),
    ("JsonWarning", "WarningRecord"),
    ("Warning", "WarningRecord"),
    ("Zone", "Zone"),
    ("Memory", "Memory"),
    ("ListeningPort", "ListeningPort"),
    ("Destination", "Destination"),
    ("Server", "Server"),
    ("CounterRow", "Counter"),
];

struct Classes {
    record: Py<PyType>,
    named: Vec<(&'static str, Py<PyType>)>,
}

static CLASS_CACHE: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASS_CACHE.get_or_try_init(py, || {
        let m = py.import("sockstat._records")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        let mut named = Vec::with_capacity(CLASSES.len());
        for &(rust, python) in CLASSES {
            named.push((rust, get(python)?));
        }
        Ok(Classes {
            record: get("Record")?,
            named,
        })
    })
}

/// Short strings kept per call: enough for the keys and the values that repeat (protocols,
/// states, commands, users), few enough that unique values (cookies, paths) cannot grow it much.
const CACHE_MAX: usize = 4096;
const CACHED_LEN: usize = 16;

/// Builds Python objects from serde values. One per call, shared by every object built in it.
pub struct Builder<'py> {
    py: Python<'py>,
    classes: &'static Classes,
    strings: RefCell<HashMap<Box<str>, Bound<'py, PyString>>>,
}

impl<'py> Builder<'py> {
    pub fn new(py: Python<'py>) -> PyResult<Builder<'py>> {
        let classes: &'static Classes = classes(py)?;
        Ok(Builder {
            py,
            classes,
            strings: RefCell::new(HashMap::new()),
        })
    }

    /// `value` as Python objects (Records, lists, ints, floats, strings, `None`).
    pub fn build(&self, value: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
        value.serialize(Ser(self)).map_err(|e| e.0)
    }

    fn string(&self, s: &str) -> Bound<'py, PyString> {
        if s.len() > CACHED_LEN {
            return PyString::new(self.py, s);
        }
        let mut cache = self.strings.borrow_mut();
        if let Some(v) = cache.get(s) {
            return v.clone();
        }
        let v = PyString::new(self.py, s);
        if cache.len() < CACHE_MAX {
            cache.insert(s.into(), v.clone());
        }
        v
    }

    fn record(&self, name: Option<&str>) -> Result<Bound<'py, PyDict>, Error> {
        let class = name
            .and_then(|n| self.classes.named.iter().find(|(rust, _)| *rust == n))
            .map_or(&self.classes.record, |(_, class)| class);
        Ok(class
            .bind(self.py)
            .call0()?
            .cast_into::<PyDict>()
            .map_err(PyErr::from)?)
    }
}

/// A Python exception carried through serde.
#[derive(Debug)]
pub struct Error(PyErr);

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Error {
        Error(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error(PyValueError::new_err(msg.to_string()))
    }
}

type Out<'py> = Result<Bound<'py, PyAny>, Error>;

#[derive(Clone, Copy)]
struct Ser<'a, 'py>(&'a Builder<'py>);

impl<'a, 'py> Ser<'a, 'py> {
    fn int(self, v: impl IntoPyObject<'py>) -> Out<'py> {
        Ok(v.into_bound_py_any(self.0.py)?)
    }
}

/// A list or tuple being built.
struct Seq<'a, 'py> {
    b: &'a Builder<'py>,
    items: Vec<Bound<'py, PyAny>>,
    tuple: bool,
}

/// A Record being built, and the key of a map entry waiting for its value.
struct Map<'a, 'py> {
    b: &'a Builder<'py>,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
}

impl<'a, 'py> ser::Serializer for Ser<'a, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'a, 'py>;
    type SerializeTuple = Seq<'a, 'py>;
    type SerializeTupleStruct = Seq<'a, 'py>;
    type SerializeTupleVariant = Seq<'a, 'py>;
    type SerializeMap = Map<'a, 'py>;
    type SerializeStruct = Map<'a, 'py>;
    type SerializeStructVariant = Map<'a, 'py>;

    fn serialize_bool(self, v: bool) -> Out<'py> {
        Ok(PyBool::new(self.0.py, v).to_owned().into_any())
    }
    fn serialize_i8(self, v: i8) -> Out<'py> {
        self.int(v)
    }
    fn serialize_i16(self, v: i16) -> Out<'py> {
        self.int(v)
    }
    fn serialize_i32(self, v: i32) -> Out<'py> {
        self.int(v)
    }
    fn serialize_i64(self, v: i64) -> Out<'py> {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Out<'py> {
        self.int(v)
    }
    fn serialize_u16(self, v: u16) -> Out<'py> {
        self.int(v)
    }
    fn serialize_u32(self, v: u32) -> Out<'py> {
        self.int(v)
    }
    fn serialize_u64(self, v: u64) -> Out<'py> {
        self.int(v)
    }
    fn serialize_f32(self, v: f32) -> Out<'py> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Out<'py> {
        // JSON has no NaN or infinity: serde_json writes null for them.
        if v.is_finite() {
            Ok(PyFloat::new(self.0.py, v).into_any())
        } else {
            self.serialize_none()
        }
    }
    fn serialize_char(self, v: char) -> Out<'py> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Out<'py> {
        Ok(self.0.string(v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Out<'py> {
        // As serde_json: an array of numbers.
        let items = v
            .iter()
            .map(|b| self.int(*b))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PyList::new(self.0.py, items)?.into_any())
    }
    fn serialize_none(self) -> Out<'py> {
        Ok(self.0.py.None().into_bound(self.0.py))
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Out<'py> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Out<'py> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Out<'py> {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _n: &'static str, _i: u32, variant: &'static str) -> Out<'py> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Out<'py> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        value: &T,
    ) -> Out<'py> {
        // As serde_json: {"variant": value}.
        let dict = self.0.record(None)?;
        dict.set_item(self.0.string(variant), value.serialize(self)?)?;
        Ok(dict.into_any())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a, 'py>, Error> {
        Ok(Seq {
            b: self.0,
            items: Vec::with_capacity(len.unwrap_or(0)),
            tuple: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a, 'py>, Error> {
        Ok(Seq {
            b: self.0,
            items: Vec::with_capacity(len),
            tuple: true,
        })
    }
    fn serialize_tuple_struct(self, _n: &'static str, len: usize) -> Result<Seq<'a, 'py>, Error> {
        self.serialize_tuple(len)
    }
    fn serialize_tuple_variant(
        self,
        _n: &'static str,
        _i: u32,
        _v: &'static str,
        len: usize,
    ) -> Result<Seq<'a, 'py>, Error> {
        Err(ser::Error::custom(format!(
            "tuple variants ({len} fields) have no JSON shape here"
        )))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Map<'a, 'py>, Error> {
        Ok(Map {
            b: self.0,
            dict: self.0.record(None)?,
            key: None,
        })
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Map<'a, 'py>, Error> {
        Ok(Map {
            b: self.0,
            dict: self.0.record(Some(name))?,
            key: None,
        })
    }
    fn serialize_struct_variant(
        self,
        _n: &'static str,
        _i: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Map<'a, 'py>, Error> {
        Err(ser::Error::custom(format!(
            "struct variant {variant} has no JSON shape here"
        )))
    }
}

impl<'py> Seq<'_, 'py> {
    fn push<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.items.push(value.serialize(Ser(self.b))?);
        Ok(())
    }

    fn finish(self) -> Out<'py> {
        Ok(if self.tuple {
            PyTuple::new(self.b.py, self.items)?.into_any()
        } else {
            PyList::new(self.b.py, self.items)?.into_any()
        })
    }
}

impl<'py> ser::SerializeSeq for Seq<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Out<'py> {
        self.finish()
    }
}

impl<'py> ser::SerializeTuple for Seq<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Out<'py> {
        self.finish()
    }
}

impl<'py> ser::SerializeTupleStruct for Seq<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Out<'py> {
        self.finish()
    }
}

impl<'py> ser::SerializeTupleVariant for Seq<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Out<'py> {
        self.finish()
    }
}

impl<'py> ser::SerializeMap for Map<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.key = Some(key.serialize(Ser(self.b))?);
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        let key = self
            .key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("a map value without its key"))?;
        self.dict.set_item(key, value.serialize(Ser(self.b))?)?;
        Ok(())
    }
    fn end(self) -> Out<'py> {
        Ok(self.dict.into_any())
    }
}

impl<'py> ser::SerializeStruct for Map<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.dict
            .set_item(self.b.string(key), value.serialize(Ser(self.b))?)?;
        Ok(())
    }
    fn end(self) -> Out<'py> {
        Ok(self.dict.into_any())
    }
}

impl<'py> ser::SerializeStructVariant for Map<'_, 'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Out<'py> {
        Ok(self.dict.into_any())
    }
}

/// A document (`ports`, `counters`, `diagnose`): `value` as an instance of the
/// `sockstat._records` class `class`, `"version": 1` first, as the command's JSON begins.
pub fn document<'py>(
    py: Python<'py>,
    class: &str,
    value: &impl Serialize,
) -> PyResult<Bound<'py, PyDict>> {
    let b = Builder::new(py)?;
    let body = b.build(value)?.cast_into::<PyDict>()?;
    let doc = py
        .import("sockstat._records")?
        .getattr(class)?
        .call0()?
        .cast_into::<PyDict>()?;
    doc.set_item("version", 1)?;
    for (k, v) in body.iter() {
        if !doc.contains(&k)? {
            doc.set_item(k, v)?;
        }
    }
    Ok(doc)
}

/// The gathering warnings as the documents' `warnings` arrays hold them, details included (the
/// command's `-v`).
pub fn warnings<'py>(
    py: Python<'py>,
    warnings: &[sockstat::Warning],
) -> PyResult<Bound<'py, PyList>> {
    let b = Builder::new(py)?;
    let items = warnings
        .iter()
        .map(|w| b.build(&sockstat::render::json::warning_object(w, true)))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// Pauses Python's cyclic garbage collector while many objects are built, and resumes it (if
/// it was running) when dropped. What is built holds no reference cycles, so nothing is lost;
/// without the pause the collector's passes over the growing result took over half the time of
/// a 57,000-row `net_connections()` (0.45 s against 0.20 s).
pub struct GcPause<'py> {
    gc: Bound<'py, PyModule>,
    resume: bool,
}

impl<'py> GcPause<'py> {
    pub fn new(py: Python<'py>) -> PyResult<GcPause<'py>> {
        let gc = py.import("gc")?;
        let resume = gc.call_method0("isenabled")?.is_truthy()?;
        if resume {
            gc.call_method0("disable")?;
        }
        Ok(GcPause { gc, resume })
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if self.resume {
            if let Err(e) = self.gc.call_method0("enable") {
                e.write_unraisable(self.gc.py(), None);
            }
        }
    }
}
