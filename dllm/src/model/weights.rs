//! Where a model's tensors come from (a checkpoint, in-memory tensors, a keyed initialisation)
//! and where they go (plain frozen tensors, or `Var`s in a `VarMap` for training).
//!
//! Models are built through a candle `VarBuilder` over [`WeightBackend`], so the module code
//! names each tensor exactly as the checkpoint does and never knows which case it is in. The
//! backend records every tensor it hands out (for saving and detached views) and the first
//! checkpoint problem it meets, so a missing or misshapen tensor is reported by name as a
//! [`DllmError`] rather than as candle's generic message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Shape, Tensor, Var};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder, VarMap};
use drift_core::rng::RngKey;

use super::lora::is_adapter_tensor;
use crate::error::{DllmError, Result};

/// The origin of the tensor values.
pub(crate) enum Source {
    /// Memory-mapped safetensors files (one or several shards), described for messages.
    Checkpoint { files: MmapedSafetensors, description: String },
    /// Tensors already in memory (detached views of a trainable model).
    Tensors(HashMap<String, Tensor>),
    /// A fresh initialisation: the tensor named `n` is drawn under `key.stream(n)`, so it is a
    /// pure function of the key and the name.
    Init(RngKey),
}

/// What the backend records while a model is built.
#[derive(Default)]
pub(crate) struct Record {
    /// Every tensor handed out, in request order.
    pub tensors: Vec<(String, Tensor)>,
    /// The first checkpoint error met.
    pub error: Option<DllmError>,
}

/// A `SimpleBackend` over a [`Source`], creating `Var`s in `varmap` when given one.
///
/// With `adapters` (a model with LoRA adapters), an adapter tensor
/// ([`is_adapter_tensor`]) the source lacks is drawn fresh under `key.stream(name)` from its
/// hint, and only adapter tensors become `Var`s: the base stays frozen.
pub(crate) struct WeightBackend {
    source: Source,
    varmap: Option<VarMap>,
    adapters: Option<RngKey>,
    record: Arc<Mutex<Record>>,
}

impl WeightBackend {
    /// A backend and the shared record it fills.
    pub fn new(
        source: Source,
        varmap: Option<VarMap>,
        adapters: Option<RngKey>,
    ) -> (Self, Arc<Mutex<Record>>) {
        let record = Arc::new(Mutex::new(Record::default()));
        (Self { source, varmap, adapters, record: record.clone() }, record)
    }

    fn has(&self, name: &str) -> bool {
        match &self.source {
            Source::Checkpoint { files, .. } => files.get(name).is_ok(),
            Source::Tensors(map) => map.contains_key(name),
            Source::Init(_) => true,
        }
    }

    /// A `VarBuilder` over this backend.
    pub fn into_var_builder(self, dtype: DType, device: &Device) -> VarBuilder<'static> {
        VarBuilder::from_backend(Box::new(self), dtype, device.clone())
    }

    fn fail(&self, err: DllmError) -> candle_core::Error {
        let message = err.to_string();
        if let Ok(mut rec) = self.record.lock() {
            rec.error.get_or_insert(err);
        }
        candle_core::Error::Msg(message)
    }

    fn check_shape(&self, name: &str, shape: &Shape, got: &[usize], files: &str) -> Result<()> {
        if got != shape.dims() {
            return Err(DllmError::WrongShape {
                tensor: name.to_string(),
                expected: shape.dims().to_vec(),
                got: got.to_vec(),
                source_files: files.to_string(),
            });
        }
        Ok(())
    }

    fn value(&self, shape: &Shape, name: &str, init: Init, dev: &Device) -> Result<Tensor> {
        if let Some(key) = self.adapters {
            if is_adapter_tensor(name) && !self.has(name) {
                return init_tensor(key.stream(name), shape, init, dev);
            }
        }
        match &self.source {
            Source::Checkpoint { files, description } => {
                let view = files.get(name).map_err(|_| DllmError::MissingTensor {
                    tensor: name.to_string(),
                    expected: shape.dims().to_vec(),
                    source_files: description.clone(),
                })?;
                self.check_shape(name, shape, view.shape(), description)?;
                Ok(files.load(name, dev)?)
            }
            Source::Tensors(map) => {
                let t = map.get(name).ok_or_else(|| DllmError::MissingTensor {
                    tensor: name.to_string(),
                    expected: shape.dims().to_vec(),
                    source_files: "the in-memory weights".into(),
                })?;
                self.check_shape(name, shape, t.dims(), "the in-memory weights")?;
                Ok(t.to_device(dev)?)
            }
            Source::Init(key) => init_tensor(key.stream(name), shape, init, dev),
        }
    }

    fn get_inner(
        &self,
        shape: Shape,
        name: &str,
        init: Init,
        dtype: DType,
        dev: &Device,
    ) -> Result<Tensor> {
        let known =
            self.record.lock().ok().and_then(|rec| {
                rec.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone())
            });
        if let Some(t) = known {
            self.check_shape(name, &shape, t.dims(), "the tensors already loaded")?;
            return Ok(t);
        }
        let value = self.value(&shape, name, init, dev)?.to_dtype(dtype)?;
        let trains = self.adapters.is_none() || is_adapter_tensor(name);
        let tensor = match &self.varmap {
            Some(varmap) if trains => {
                let var = Var::from_tensor(&value)?;
                let t = var.as_tensor().clone();
                varmap
                    .data()
                    .lock()
                    .map_err(|_| candle_core::Error::Msg("the VarMap lock is poisoned".into()))?
                    .insert(name.to_string(), var);
                t
            }
            _ => value,
        };
        if let Ok(mut rec) = self.record.lock() {
            rec.tensors.push((name.to_string(), tensor.clone()));
        }
        Ok(tensor)
    }
}

/// A fresh tensor for the initialisation hint `init`: constants as given, normals and uniforms
/// from `key`. Kaiming hints are not used by drift's models and are rejected.
fn init_tensor(key: RngKey, shape: &Shape, init: Init, dev: &Device) -> Result<Tensor> {
    let t = match init {
        Init::Const(c) => (Tensor::ones(shape, DType::F32, dev)? * c)?,
        Init::Randn { mean, stdev } => key.normal(shape, DType::F32, dev)?.affine(stdev, mean)?,
        Init::Uniform { lo, up } => key.uniform(shape, DType::F32, dev)?.affine(up - lo, lo)?,
        Init::Kaiming { .. } => {
            return Err(DllmError::Input {
                name: "init",
                got: "a Kaiming hint".into(),
                expected: "Const, Randn or Uniform (keyed initialisation)".into(),
            })
        }
    };
    Ok(t)
}

impl SimpleBackend for WeightBackend {
    fn get(
        &self,
        s: Shape,
        name: &str,
        h: Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        self.get_inner(s, name, h, dtype, dev).map_err(|e| self.fail(e))
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        match &self.source {
            Source::Checkpoint { files, .. } => files.load(name, dev)?.to_dtype(dtype),
            Source::Tensors(map) => match map.get(name) {
                Some(t) => t.to_dtype(dtype)?.to_device(dev),
                None => Err(candle_core::Error::CannotFindTensor { path: name.to_string() }),
            },
            Source::Init(_) => Err(candle_core::Error::Msg(format!(
                "`{name}` has no shape to initialise from: use `get` with a shape"
            ))),
        }
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.has(name)
    }
}

/// Builds a model with `build` over `backend`, returning it with every tensor it requested.
/// A checkpoint problem recorded by the backend is returned in preference to candle's message.
pub(crate) fn build_with<M>(
    backend: WeightBackend,
    record: Arc<Mutex<Record>>,
    dtype: DType,
    device: &Device,
    build: impl FnOnce(&VarBuilder) -> Result<M>,
) -> Result<(M, Vec<(String, Tensor)>)> {
    let vb = backend.into_var_builder(dtype, device);
    let built = build(&vb);
    drop(vb);
    let mut rec = record
        .lock()
        .map_err(|_| DllmError::Candle(candle_core::Error::Msg("weight record poisoned".into())))?;
    if let Some(err) = rec.error.take() {
        return Err(err);
    }
    let model = built?;
    Ok((model, std::mem::take(&mut rec.tensors)))
}
