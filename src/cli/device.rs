//! `--device`: where a command's tensors live.

use candle_core::Device;

/// The device named by `--device`: `cpu`, `cuda` (GPU 0) or `cuda:N`.
///
/// A CUDA name on a `drift` built without the `cuda` feature, or a GPU that cannot be opened,
/// is a usage error that names the value and what was expected.
pub fn parse(name: &str) -> anyhow::Result<Device> {
    let ordinal = match name.trim() {
        "cpu" => return Ok(Device::Cpu),
        "cuda" => 0,
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => {
                return Err(super::usage(format!(
                    "--device {name:?}: expected cpu, cuda or cuda:N (N a GPU ordinal)"
                )))
            }
        },
    };
    if !candle_core::utils::cuda_is_available() {
        return Err(super::usage(format!(
            "--device {name}: this drift was built without CUDA; rebuild with \
             `cargo build --release --features cuda`"
        )));
    }
    Device::new_cuda(ordinal)
        .map_err(|e| super::usage(format!("--device {name}: cannot open GPU {ordinal}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_parses_and_bad_names_are_usage_errors_naming_the_value() {
        assert!(parse("cpu").unwrap().is_cpu());
        for bad in ["tpu", "cuda:x", "cuda:-1", ""] {
            let err = parse(bad).unwrap_err();
            assert!(err.downcast_ref::<super::super::UsageError>().is_some(), "{bad}: {err}");
            assert!(err.to_string().contains("expected cpu, cuda or cuda:N"), "{err}");
        }
    }

    #[test]
    #[cfg(not(feature = "cuda"))]
    fn cuda_without_the_feature_says_how_to_get_it() {
        let err = parse("cuda:0").unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
    }
}
