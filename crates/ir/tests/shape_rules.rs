//! Shape/dtype rules: one Ok case per primitive with the hand-derived result type, and the error cases.
// Operand lists read better as `&[x.clone()]` next to their multi-operand neighbours.
#![allow(clippy::cloned_ref_to_slice_refs)]

use DType::{Bool, F32, F64, I32, U32};
use kiln_ir::{
    ArgOp, Array, BinaryOp, CompareOp, CumulativeOp, DType, EvalError, Function, IndexMode, Prim, ReduceOp,
    ScatterOp, Shape, TensorType, TypeError, UnaryOp, Var, eval_prim, human_bytes, output_types,
};

fn t(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

fn s(dtype: DType) -> TensorType {
    TensorType::scalar(dtype)
}

#[track_caller]
fn ok(prim: &Prim, inputs: &[TensorType]) -> Vec<TensorType> {
    match output_types(prim, inputs) {
        Ok(v) => v,
        Err(e) => panic!("{} on {inputs:?} failed: {e}", prim.name()),
    }
}

#[track_caller]
fn ok1(prim: &Prim, inputs: &[TensorType]) -> TensorType {
    let v = ok(prim, inputs);
    assert_eq!(v.len(), 1, "{} gave {v:?}", prim.name());
    v[0].clone()
}

/// The rule fails, the error names the primitive and the operands, and the message mentions each of `parts`.
#[track_caller]
fn err(prim: &Prim, inputs: &[TensorType], parts: &[&str]) -> TypeError {
    let e = match output_types(prim, inputs) {
        Ok(v) => panic!("{} on {inputs:?} unexpectedly gave {v:?}", prim.name()),
        Err(e) => e,
    };
    assert_eq!(e.prim, prim.name());
    assert_eq!(e.operands, inputs);
    assert!(e.to_string().starts_with(&format!("{}: ", prim.name())), "{e}");
    for p in parts {
        assert!(e.message.contains(p), "message {:?} lacks {p:?}", e.message);
    }
    assert_eq!(e.message, e.message.to_lowercase(), "messages are lowercase");
    e
}

/// A function with these parameter types whose outputs have `outs` types (zeros constants).
fn sig(params: &[TensorType], outs: &[TensorType]) -> Function {
    let mut f = Function::new();
    for p in params {
        f.add_param(p.clone());
    }
    for o in outs {
        let v = f.add_const(Array::zeros(o));
        f.outputs.push(v);
    }
    f
}

// ---------------------------------------------------------------- elementwise

#[test]
fn unary_dtype_table() {
    for op in UnaryOp::ALL {
        let p = Prim::Unary(op);
        // (float, int, bool) acceptance per the task's table.
        let (float, int, boolean) = match op {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => (true, true, false),
            UnaryOp::Not => (false, true, true),
            UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::RoundEven
            | UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Erf
            | UnaryOp::ErfInv
            | UnaryOp::IsFinite => (true, false, false),
        };
        for d in DType::ALL {
            let accepted = if d.is_float() {
                float
            } else if d.is_int() {
                int
            } else {
                boolean
            };
            let x = t(d, &[2, 3]);
            if accepted {
                let want = if op == UnaryOp::IsFinite { t(Bool, &[2, 3]) } else { x.clone() };
                assert_eq!(ok1(&p, &[x]), want, "{}", op.name());
            } else {
                err(&p, &[x], &[&format!("dtype {d} is not")]);
            }
        }
    }
    err(&Prim::Unary(UnaryOp::Exp), &[t(I32, &[3])], &["dtype i32 is not a float type"]);
    err(&Prim::Unary(UnaryOp::Not), &[t(F32, &[3])], &["dtype f32 is not bool or an integer type"]);
    err(&Prim::Unary(UnaryOp::Neg), &[s(Bool)], &["dtype bool is not a numeric type"]);
}

#[test]
fn unary_keeps_any_shape_rank_0_to_4_and_empty() {
    for dims in [&[][..], &[0], &[3], &[2, 0], &[1, 2, 3], &[2, 1, 0, 4]] {
        assert_eq!(ok1(&Prim::Unary(UnaryOp::Sqrt), &[t(F64, dims)]), t(F64, dims));
        assert_eq!(ok1(&Prim::Unary(UnaryOp::IsFinite), &[t(F32, dims)]), t(Bool, dims));
    }
}

#[test]
fn unary_operand_count() {
    let p = Prim::Unary(UnaryOp::Neg);
    err(&p, &[], &["expected 1 operand, got 0"]);
    err(&p, &[s(F32), s(F32)], &["expected 1 operand, got 2"]);
}

#[test]
fn binary_shapes_must_match() {
    let p = Prim::Binary(BinaryOp::Add);
    let e = err(&p, &[t(F32, &[3]), t(F32, &[4])], &["shapes (3,) and (4,) differ"]);
    assert_eq!(e.to_string(), "add: shapes (3,) and (4,) differ (operands: f32[3], f32[4])");
    // No broadcasting: a scalar does not combine with a vector.
    err(&p, &[s(F32), t(F32, &[4])], &["shapes () and (4,) differ"]);
    err(&p, &[t(F32, &[2, 3]), t(F32, &[3, 2])], &["(2, 3)", "(3, 2)"]);
    err(&p, &[t(F32, &[3]), t(F64, &[3])], &["dtypes f32 and f64 differ"]);
    err(&p, &[t(F32, &[3])], &["expected 2 operands, got 1"]);
    err(&p, &[s(F32), s(F32), s(F32)], &["expected 2 operands, got 3"]);
}

#[test]
fn binary_dtype_table() {
    for op in BinaryOp::ALL {
        let (float, int, boolean) = match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                (true, true, false)
            }
            BinaryOp::Max | BinaryOp::Min => (true, true, true),
            BinaryOp::Pow | BinaryOp::Atan2 => (true, false, false),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => (false, true, true),
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical => (false, true, false),
        };
        for d in DType::ALL {
            let accepted = if d.is_float() {
                float
            } else if d.is_int() {
                int
            } else {
                boolean
            };
            let x = t(d, &[0, 2]);
            let p = Prim::Binary(op);
            if accepted {
                assert_eq!(ok1(&p, &[x.clone(), x.clone()]), x, "{}", op.name());
            } else {
                err(&p, &[x.clone(), x], &[&format!("dtype {d} is not")]);
            }
        }
    }
    err(&Prim::Binary(BinaryOp::ShiftLeft), &[s(F32), s(F32)], &["dtype f32 is not an integer type"]);
    err(&Prim::Binary(BinaryOp::Pow), &[s(I32), s(I32)], &["dtype i32 is not a float type"]);
}

#[test]
fn compare_any_dtype_bool_result() {
    for op in CompareOp::ALL {
        for d in DType::ALL {
            let x = t(d, &[2, 1, 3]);
            assert_eq!(ok1(&Prim::Compare(op), &[x.clone(), x]), t(Bool, &[2, 1, 3]));
        }
        assert_eq!(ok1(&Prim::Compare(op), &[s(F32), s(F32)]), s(Bool));
    }
    let lt = Prim::Compare(CompareOp::Lt);
    err(&lt, &[t(I32, &[3]), t(I32, &[4])], &["shapes (3,) and (4,) differ"]);
    err(&lt, &[t(I32, &[3]), t(U32, &[3])], &["dtypes i32 and u32 differ"]);
    err(&lt, &[t(I32, &[3])], &["expected 2 operands, got 1"]);
}

#[test]
fn select_rule() {
    let p = Prim::Select;
    let x = t(F32, &[2, 3]);
    assert_eq!(ok1(&p, &[t(Bool, &[2, 3]), x.clone(), x.clone()]), x);
    assert_eq!(ok1(&p, &[s(Bool), x.clone(), x.clone()]), x);
    assert_eq!(ok1(&p, &[s(Bool), s(I32), s(I32)]), s(I32));
    err(&p, &[t(F32, &[2, 3]), x.clone(), x.clone()], &["predicate dtype f32 is not bool"]);
    err(&p, &[t(Bool, &[3]), x.clone(), x.clone()], &["(3,)", "(2, 3)"]);
    err(&p, &[s(Bool), x.clone(), t(F32, &[3, 2])], &["f32[2,3]", "f32[3,2]"]);
    err(&p, &[s(Bool), x.clone(), t(F64, &[2, 3])], &["f32[2,3]", "f64[2,3]"]);
    err(&p, &[s(Bool), x.clone()], &["expected 3 operands, got 2"]);
}

#[test]
fn clamp_rule() {
    let p = Prim::Clamp;
    let x = t(F32, &[4]);
    assert_eq!(ok1(&p, &[s(F32), x.clone(), s(F32)]), x);
    assert_eq!(ok1(&p, &[x.clone(), x.clone(), s(F32)]), x);
    assert_eq!(ok1(&p, &[x.clone(), x.clone(), x.clone()]), x);
    assert_eq!(ok1(&p, &[s(U32), s(U32), s(U32)]), s(U32));
    err(&p, &[s(Bool), s(Bool), s(Bool)], &["dtype bool is not a numeric type"]);
    err(&p, &[t(F32, &[3]), x.clone(), s(F32)], &["lower bound", "(3,)", "(4,)"]);
    err(&p, &[s(F32), x.clone(), s(F64)], &["upper bound dtype f64 differs from operand dtype f32"]);
    err(&p, &[s(F32), x.clone()], &["expected 3 operands, got 2"]);
}

#[test]
fn convert_element_type_any_to_any() {
    for from in DType::ALL {
        for to in DType::ALL {
            let p = Prim::ConvertElementType { dtype: to };
            assert_eq!(ok1(&p, &[t(from, &[2, 0])]), t(to, &[2, 0]));
        }
    }
    err(&Prim::ConvertElementType { dtype: F32 }, &[], &["expected 1 operand, got 0"]);
}

#[test]
fn bitcast_convert_type_same_width() {
    let four = [F32, I32, U32];
    for from in four {
        for to in four {
            assert_eq!(ok1(&Prim::BitcastConvertType { dtype: to }, &[t(from, &[3])]), t(to, &[3]));
        }
        err(&Prim::BitcastConvertType { dtype: F64 }, &[s(from)], &["widths differ"]);
        err(&Prim::BitcastConvertType { dtype: from }, &[s(F64)], &["cannot bitcast f64 (8 bytes)"]);
    }
    assert_eq!(ok1(&Prim::BitcastConvertType { dtype: F64 }, &[s(F64)]), s(F64));
    err(&Prim::BitcastConvertType { dtype: Bool }, &[s(Bool)], &["bool"]);
    err(&Prim::BitcastConvertType { dtype: I32 }, &[s(Bool)], &["bool"]);
    err(&Prim::BitcastConvertType { dtype: Bool }, &[s(U32)], &["bool"]);
}

#[test]
fn iota_rule() {
    let p = |dtype, dims: &[usize], dimension| Prim::Iota { dtype, shape: Shape::new(dims), dimension };
    assert_eq!(ok1(&p(I32, &[2, 3], 1), &[]), t(I32, &[2, 3]));
    assert_eq!(ok1(&p(F64, &[0], 0), &[]), t(F64, &[0]));
    assert_eq!(ok1(&p(U32, &[1, 2, 3, 4], 3), &[]), t(U32, &[1, 2, 3, 4]));
    err(&p(Bool, &[3], 0), &[], &["dtype bool is not a numeric type"]);
    err(&p(I32, &[2, 3], 2), &[], &["dimension 2 out of range for rank 2"]);
    err(&p(I32, &[], 0), &[], &["rank >= 1"]);
    err(&p(I32, &[3], 0), &[s(I32)], &["expected 0 operands, got 1"]);
}

// ---------------------------------------------------------------- structural

fn bcast(dims: &[usize], bd: &[usize]) -> Prim {
    Prim::BroadcastInDim { shape: Shape::new(dims), broadcast_dimensions: bd.to_vec() }
}

#[test]
fn broadcast_in_dim_rule() {
    assert_eq!(ok1(&bcast(&[2, 3], &[1]), &[t(F32, &[3])]), t(F32, &[2, 3]));
    assert_eq!(ok1(&bcast(&[2, 3], &[0]), &[t(F32, &[2])]), t(F32, &[2, 3]));
    assert_eq!(ok1(&bcast(&[4, 3], &[0, 1]), &[t(I32, &[1, 3])]), t(I32, &[4, 3]));
    assert_eq!(ok1(&bcast(&[2, 0], &[]), &[s(Bool)]), t(Bool, &[2, 0]));
    assert_eq!(ok1(&bcast(&[], &[]), &[s(F64)]), s(F64));
    assert_eq!(ok1(&bcast(&[5, 0, 2], &[1, 2]), &[t(F32, &[1, 2])]), t(F32, &[5, 0, 2]));
    err(&bcast(&[2, 3], &[]), &[t(F32, &[3])], &["has 0 entries but the operand has rank 1"]);
    err(&bcast(&[2, 3], &[1, 0]), &[t(F32, &[3, 2])], &["not strictly increasing"]);
    err(&bcast(&[2, 3], &[1, 1]), &[t(F32, &[3, 3])], &["not strictly increasing"]);
    err(&bcast(&[2, 3], &[2]), &[t(F32, &[3])], &["broadcast dimension 2 out of range for rank 2"]);
    err(&bcast(&[2, 4], &[1]), &[t(F32, &[3])], &["size 3", "size 4", "(3,)", "(2, 4)"]);
    err(&bcast(&[2, 3], &[1]), &[], &["expected 1 operand, got 0"]);
}

#[test]
fn reshape_rule() {
    let p = |dims: &[usize]| Prim::Reshape { new_sizes: Shape::new(dims) };
    assert_eq!(ok1(&p(&[3, 2]), &[t(F32, &[2, 3])]), t(F32, &[3, 2]));
    assert_eq!(ok1(&p(&[1, 6, 1]), &[t(F32, &[2, 3])]), t(F32, &[1, 6, 1]));
    assert_eq!(ok1(&p(&[]), &[t(I32, &[1, 1])]), s(I32));
    assert_eq!(ok1(&p(&[0]), &[t(I32, &[0, 5])]), t(I32, &[0]));
    err(&p(&[4]), &[t(F32, &[2, 3])], &["cannot reshape (2, 3) to (4,)"]);
    // 2^63 * 4 overflows usize: an error, not a panic, and not equal to any small size.
    let huge = 1usize << 63;
    err(&p(&[0]), &[t(F32, &[huge, 4])], &["element counts differ"]);
    err(&p(&[huge, 4]), &[t(F32, &[huge, 4])], &["element counts differ"]);
    // A zero dimension makes the count 0 whatever the others are.
    assert_eq!(ok1(&p(&[0]), &[t(F32, &[huge, 4, 0])]), t(F32, &[0]));
}

#[test]
fn transpose_rule() {
    let p = |perm: &[usize]| Prim::Transpose { permutation: perm.to_vec() };
    // result dim i = operand dim perm[i]: (2,3,4) with [2,0,1] -> (4,2,3).
    assert_eq!(ok1(&p(&[2, 0, 1]), &[t(F32, &[2, 3, 4])]), t(F32, &[4, 2, 3]));
    assert_eq!(ok1(&p(&[]), &[s(F32)]), s(F32));
    err(&p(&[0, 0]), &[t(F32, &[2, 3])], &["repeated"]);
    err(&p(&[0, 2]), &[t(F32, &[2, 3])], &["2 out of range for rank 2"]);
    err(&p(&[0]), &[t(F32, &[2, 3])], &["not a permutation"]);
}

#[test]
fn rev_rule() {
    let p = |d: &[usize]| Prim::Rev { dimensions: d.to_vec() };
    assert_eq!(ok1(&p(&[1, 0]), &[t(U32, &[2, 3])]), t(U32, &[2, 3]));
    assert_eq!(ok1(&p(&[]), &[s(U32)]), s(U32));
    err(&p(&[1, 1]), &[t(U32, &[2, 3])], &["dimension 1 repeated"]);
    err(&p(&[2]), &[t(U32, &[2, 3])], &["dimension 2 out of range for rank 2"]);
}

fn slice(start: &[usize], limit: &[usize], strides: &[usize]) -> Prim {
    Prim::Slice { start: start.to_vec(), limit: limit.to_vec(), strides: strides.to_vec() }
}

#[test]
fn slice_rule() {
    // ceil((8 - 1) / 3) = 3 (elements 1, 4, 7).
    assert_eq!(ok1(&slice(&[1], &[8], &[3]), &[t(F32, &[10])]), t(F32, &[3]));
    // dim 0: ceil(5/2) = 3; dim 1: [4, 4) is empty.
    assert_eq!(ok1(&slice(&[0, 4], &[5, 4], &[2, 1]), &[t(F32, &[5, 4])]), t(F32, &[3, 0]));
    // A huge stride takes just the first element: ceil(3 / usize::MAX) = 1, no overflow.
    assert_eq!(ok1(&slice(&[0], &[3], &[usize::MAX]), &[t(F32, &[3])]), t(F32, &[1]));
    assert_eq!(ok1(&slice(&[], &[], &[]), &[s(F32)]), s(F32));
    err(&slice(&[5], &[4], &[1]), &[t(F32, &[10])], &["[5, 4)", "size 10"]);
    err(&slice(&[0], &[11], &[1]), &[t(F32, &[10])], &["[0, 11)", "(10,)"]);
    err(&slice(&[0], &[5], &[0]), &[t(F32, &[10])], &["stride 0"]);
    err(&slice(&[0], &[5, 1], &[1]), &[t(F32, &[10])], &["limit has 2 entries but the operand has rank 1"]);
}

#[test]
fn dynamic_slice_rule() {
    let p = |sizes: &[usize]| Prim::DynamicSlice { slice_sizes: sizes.to_vec() };
    let x = t(F32, &[5, 6]);
    assert_eq!(ok1(&p(&[2, 6]), &[x.clone(), s(I32), s(U32)]), t(F32, &[2, 6]));
    assert_eq!(ok1(&p(&[0, 0]), &[x.clone(), s(I32), s(I32)]), t(F32, &[0, 0]));
    assert_eq!(ok1(&p(&[]), &[s(Bool)]), s(Bool));
    err(&p(&[2, 6]), &[x.clone(), s(I32)], &["expected 2 start indices", "got 1"]);
    err(&p(&[2, 6]), &[x.clone(), s(I32), s(F32)], &["start index 1 dtype f32 is not i32 or u32"]);
    err(&p(&[2, 6]), &[x.clone(), s(I32), t(I32, &[1])], &["start index 1 has shape (1,)"]);
    err(&p(&[2, 7]), &[x.clone(), s(I32), s(I32)], &["slice size 7 exceeds dimension 1 of size 6"]);
    err(&p(&[2]), &[x.clone(), s(I32), s(I32)], &["slice_sizes has 1 entries"]);
    err(&p(&[]), &[], &["expected at least 1 operand, got 0"]);
}

#[test]
fn dynamic_update_slice_rule() {
    let p = Prim::DynamicUpdateSlice;
    let x = t(F32, &[5, 6]);
    assert_eq!(ok1(&p, &[x.clone(), t(F32, &[2, 6]), s(I32), s(I32)]), x);
    assert_eq!(ok1(&p, &[x.clone(), t(F32, &[0, 0]), s(U32), s(I32)]), x);
    assert_eq!(ok1(&p, &[s(I32), s(I32)]), s(I32));
    err(
        &p,
        &[x.clone(), t(F32, &[2, 7]), s(I32), s(I32)],
        &["update shape (2, 7) does not fit in operand shape (5, 6)"],
    );
    err(&p, &[x.clone(), t(F32, &[2]), s(I32), s(I32)], &["(2,)", "(5, 6)"]);
    err(
        &p,
        &[x.clone(), t(F64, &[2, 6]), s(I32), s(I32)],
        &["update dtype f64 differs from operand dtype f32"],
    );
    err(&p, &[x.clone(), t(F32, &[2, 6]), s(I32)], &["expected 2 start indices"]);
    err(&p, &[x.clone()], &["expected at least 2 operands, got 1"]);
}

#[test]
fn concatenate_rule() {
    let p = |d| Prim::Concatenate { dimension: d };
    // 2 + 4 + 0 rows.
    assert_eq!(ok1(&p(0), &[t(F32, &[2, 3]), t(F32, &[4, 3]), t(F32, &[0, 3])]), t(F32, &[6, 3]));
    assert_eq!(ok1(&p(1), &[t(I32, &[2, 3]), t(I32, &[2, 1])]), t(I32, &[2, 4]));
    assert_eq!(ok1(&p(0), &[t(Bool, &[7])]), t(Bool, &[7]));
    err(&p(0), &[], &["expected at least 1 operand, got 0"]);
    err(&p(0), &[t(F32, &[2, 3]), t(F32, &[2, 4])], &["shapes (2, 3) and (2, 4) differ outside dimension 0"]);
    err(&p(0), &[t(F32, &[2, 3]), t(F32, &[2])], &["(2, 3)", "(2,)"]);
    err(&p(0), &[t(F32, &[2]), t(F64, &[2])], &["dtypes f32 and f64 differ"]);
    err(&p(2), &[t(F32, &[2, 3])], &["dimension 2 out of range for rank 2"]);
    err(&p(0), &[s(F32), s(F32)], &["dimension 0 out of range for rank 0"]);
    let huge = usize::MAX / 2 + 1;
    err(&p(0), &[t(F32, &[huge]), t(F32, &[huge])], &["overflows"]);
}

fn pad(low: &[i64], high: &[i64], interior: &[usize]) -> Prim {
    Prim::Pad { low: low.to_vec(), high: high.to_vec(), interior: interior.to_vec() }
}

#[test]
fn pad_rule() {
    // 1 + 2 + 3 + (3 - 1) * 1 = 8.
    assert_eq!(ok1(&pad(&[1], &[2], &[1]), &[t(F32, &[3]), s(F32)]), t(F32, &[8]));
    // Empty dim: no interior gaps, 1 + 0 + 0 = 1; second dim: -1 - 1 + 4 = 2 (cropping).
    assert_eq!(ok1(&pad(&[1, -1], &[0, -1], &[5, 0]), &[t(I32, &[0, 4]), s(I32)]), t(I32, &[1, 2]));
    // Cropping everything: -2 + 0 + 2 = 0.
    assert_eq!(ok1(&pad(&[-2], &[0], &[0]), &[t(F32, &[2]), s(F32)]), t(F32, &[0]));
    assert_eq!(ok1(&pad(&[], &[], &[]), &[s(F32), s(F32)]), s(F32));
    // -5 + 0 + 2 = -3.
    err(&pad(&[-5], &[0], &[0]), &[t(F32, &[2]), s(F32)], &["dimension 0 of size 2 gives size -3"]);
    err(&pad(&[1], &[1], &[0]), &[t(F32, &[2]), t(F32, &[1])], &["padding value f32[1] is not a scalar"]);
    err(&pad(&[1], &[1], &[0]), &[t(F32, &[2]), s(F64)], &["padding value f64[]", "f32"]);
    err(&pad(&[1], &[1], &[0, 0]), &[t(F32, &[2]), s(F32)], &["interior has 2 entries"]);
    err(&pad(&[1], &[1], &[0]), &[t(F32, &[2])], &["expected 2 operands, got 1"]);
    // Overflow and extreme negatives give errors, not panics.
    err(&pad(&[0], &[0], &[usize::MAX]), &[t(F32, &[usize::MAX]), s(F32)], &["dimension 0"]);
    err(&pad(&[i64::MAX], &[i64::MAX], &[usize::MAX]), &[t(F32, &[3]), s(F32)], &["dimension 0"]);
    err(&pad(&[i64::MIN], &[i64::MIN], &[0]), &[t(F32, &[3]), s(F32)], &["dimension 0"]);
}

// ---------------------------------------------------------------- reductions

#[test]
fn reduce_rule() {
    for op in ReduceOp::ALL {
        let p = |axes: &[usize]| Prim::Reduce { op, axes: axes.to_vec() };
        assert_eq!(ok1(&p(&[2, 0]), &[t(F32, &[2, 3, 4])]), t(F32, &[3]));
        assert_eq!(ok1(&p(&[]), &[t(I32, &[2, 3])]), t(I32, &[2, 3]));
        assert_eq!(ok1(&p(&[0, 1]), &[t(U32, &[2, 0])]), s(U32));
        assert_eq!(ok1(&p(&[]), &[s(F64)]), s(F64));
        err(&p(&[1, 1]), &[t(F32, &[2, 3])], &["axis 1 repeated"]);
        err(&p(&[3]), &[t(F32, &[2, 3])], &["axis 3 out of range for rank 2"]);
        let bool_ok = match op {
            ReduceOp::Sum | ReduceOp::Prod => false,
            ReduceOp::Max | ReduceOp::Min => true,
        };
        if bool_ok {
            assert_eq!(ok1(&p(&[0]), &[t(Bool, &[4])]), s(Bool));
        } else {
            err(&p(&[0]), &[t(Bool, &[4])], &["dtype bool is not a numeric type"]);
        }
    }
}

#[test]
fn arg_reduce_rule() {
    for op in ArgOp::ALL {
        let p = |axis, index_dtype| Prim::ArgReduce { op, axis, index_dtype };
        assert_eq!(ok1(&p(1, I32), &[t(F32, &[2, 3])]), t(I32, &[2]));
        assert_eq!(ok1(&p(0, U32), &[t(I32, &[5])]), s(U32));
        err(&p(1, I32), &[t(F32, &[2, 0])], &["axis 1 of shape (2, 0) is empty"]);
        err(&p(2, I32), &[t(F32, &[2, 3])], &["axis 2 out of range for rank 2"]);
        err(&p(0, I32), &[s(F32)], &["axis 0 out of range for rank 0"]);
        err(&p(0, F32), &[t(F32, &[3])], &["index dtype f32 is not i32 or u32"]);
        err(&p(0, I32), &[t(Bool, &[3])], &["dtype bool is not a numeric type"]);
        // Positions 0..n-1 must fit the index dtype: n <= 2^31 for i32, n <= 2^32 for u32.
        let (i31, i32_) = (1usize << 31, 1usize << 32);
        assert_eq!(ok1(&p(0, I32), &[t(F32, &[i31])]), s(I32));
        err(
            &p(0, I32),
            &[t(F32, &[i31 + 1])],
            &["i32 values cannot number the 2147483649 positions along axis 0"],
        );
        assert_eq!(ok1(&p(1, U32), &[t(F32, &[1, i32_])]), t(U32, &[1]));
        err(
            &p(1, U32),
            &[t(F32, &[1, i32_ + 1])],
            &["u32 values cannot number the 4294967297 positions along axis 1"],
        );
    }
}

#[test]
fn integer_iota_positions_fit_their_dtype() {
    let iota = |dtype, dims: &[usize], dimension| Prim::Iota { dtype, shape: Shape::new(dims), dimension };
    let (i31, i32_) = (1usize << 31, 1usize << 32);
    assert_eq!(ok1(&iota(I32, &[3, i31], 1), &[]), t(I32, &[3, i31]));
    err(
        &iota(I32, &[3, i31 + 1], 1),
        &[],
        &["i32 values cannot number the 2147483649 positions along dimension 1"],
    );
    // Only the iota dimension counts: a long other axis repeats small positions.
    assert_eq!(ok1(&iota(I32, &[i31 + 1, 3], 1), &[]), t(I32, &[i31 + 1, 3]));
    assert_eq!(ok1(&iota(U32, &[i32_], 0), &[]), t(U32, &[i32_]));
    err(
        &iota(U32, &[i32_ + 1], 0),
        &[],
        &["u32 values cannot number the 4294967297 positions along dimension 0"],
    );
    // Floats number any count (inexactly past 2^24 for f32, as in JAX).
    assert_eq!(ok1(&iota(F32, &[i32_ + 1], 0), &[]), t(F32, &[i32_ + 1]));
}

#[test]
fn cumulative_rule() {
    for op in CumulativeOp::ALL {
        for reverse in [false, true] {
            let p = |axis| Prim::Cumulative { op, axis, reverse };
            assert_eq!(ok1(&p(1), &[t(F32, &[2, 3])]), t(F32, &[2, 3]));
            assert_eq!(ok1(&p(0), &[t(I32, &[0])]), t(I32, &[0]));
            err(&p(2), &[t(F32, &[2, 3])], &["axis 2 out of range for rank 2"]);
            err(&p(0), &[s(F32)], &["axis 0 out of range for rank 0"]);
            match op {
                CumulativeOp::Sum | CumulativeOp::Prod => {
                    err(&p(0), &[t(Bool, &[3])], &["dtype bool is not a numeric type"]);
                }
                CumulativeOp::Max | CumulativeOp::Min => {
                    assert_eq!(ok1(&p(0), &[t(Bool, &[3])]), t(Bool, &[3]))
                }
            }
        }
    }
}

#[test]
fn sort_rule() {
    let p = |dimension, num_keys| Prim::Sort { dimension, num_keys };
    let (a, b) = (t(F32, &[3, 4]), t(I32, &[3, 4]));
    assert_eq!(ok(&p(1, 1), &[a.clone(), b.clone()]), vec![a.clone(), b.clone()]);
    assert_eq!(ok(&p(0, 2), &[a.clone(), b.clone()]), vec![a.clone(), b.clone()]);
    assert_eq!(ok(&p(0, 1), &[t(Bool, &[0])]), vec![t(Bool, &[0])]);
    err(&p(0, 0), &[a.clone()], &["num_keys 0"]);
    err(&p(0, 3), &[a.clone(), b.clone()], &["num_keys 3"]);
    err(&p(0, 1), &[a.clone(), t(I32, &[4, 3])], &["shapes (3, 4) and (4, 3) differ"]);
    err(&p(2, 1), &[a.clone()], &["dimension 2 out of range for rank 2"]);
    err(&p(0, 1), &[s(F32)], &["dimension 0 out of range for rank 0"]);
    err(&p(0, 1), &[], &["expected at least 1 operand, got 0"]);
}

fn dot(lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize], pref: Option<DType>) -> Prim {
    Prim::DotGeneral {
        lhs_contracting: lc.to_vec(),
        rhs_contracting: rc.to_vec(),
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
        preferred_element_type: pref,
    }
}

#[test]
fn dot_general_rule() {
    // matmul (2,3)x(3,4) -> (2,4).
    assert_eq!(ok1(&dot(&[1], &[0], &[], &[], None), &[t(F32, &[2, 3]), t(F32, &[3, 4])]), t(F32, &[2, 4]));
    // batched (5,2,3)x(5,3,4) -> batch 5, lhs free 2, rhs free 4.
    let bmm = dot(&[2], &[1], &[0], &[0], None);
    assert_eq!(ok1(&bmm, &[t(F64, &[5, 2, 3]), t(F64, &[5, 3, 4])]), t(F64, &[5, 2, 4]));
    // batch not leading on rhs: lhs (7,2,3) batch 0 contract 2; rhs (3,7,4) batch 1 contract 0 -> (7,2,4).
    let p = dot(&[2], &[0], &[0], &[1], None);
    assert_eq!(ok1(&p, &[t(I32, &[7, 2, 3]), t(I32, &[3, 7, 4])]), t(I32, &[7, 2, 4]));
    // free dims keep their order: lhs (2,3,4) contract 1, rhs (5,3) contract 1 -> (2,4,5).
    let p = dot(&[1], &[1], &[], &[], None);
    assert_eq!(ok1(&p, &[t(F32, &[2, 3, 4]), t(F32, &[5, 3])]), t(F32, &[2, 4, 5]));
    // outer product and scalar products.
    let outer = dot(&[], &[], &[], &[], None);
    assert_eq!(ok1(&outer, &[t(F32, &[2]), t(F32, &[3])]), t(F32, &[2, 3]));
    assert_eq!(ok1(&outer, &[s(F32), s(F32)]), s(F32));
    // inner product over an empty dim, with a preferred dtype.
    let p = dot(&[0], &[0], &[], &[], Some(F64));
    assert_eq!(ok1(&p, &[t(F32, &[0]), t(F32, &[0])]), s(F64));
    let mm_i = dot(&[1], &[0], &[], &[], Some(I32));
    assert_eq!(ok1(&mm_i, &[t(U32, &[2, 3]), t(U32, &[3, 4])]), t(I32, &[2, 4]));

    let mm = dot(&[1], &[0], &[], &[], None);
    err(&mm, &[t(F32, &[2, 3]), t(F32, &[5, 4])], &["size 3", "size 5", "(2, 3)", "(5, 4)"]);
    err(&mm, &[t(F32, &[2, 3]), t(F64, &[3, 4])], &["dtypes f32 and f64 differ"]);
    err(&mm, &[t(Bool, &[2, 3]), t(Bool, &[3, 4])], &["dtype bool is not a numeric type"]);
    err(&mm, &[t(F32, &[2, 3])], &["expected 2 operands, got 1"]);
    err(
        &dot(&[1], &[], &[], &[], None),
        &[t(F32, &[2, 3]), t(F32, &[3])],
        &["contracting dimensions [1] and []"],
    );
    err(&dot(&[], &[], &[0], &[], None), &[t(F32, &[2]), t(F32, &[2])], &["batch dimensions [0] and []"]);
    err(
        &dot(&[0], &[0], &[0], &[1], None),
        &[t(F32, &[2, 2]), t(F32, &[2, 2])],
        &["lhs dimension 0 repeated"],
    );
    err(
        &dot(&[2], &[0], &[], &[], None),
        &[t(F32, &[2, 3]), t(F32, &[3])],
        &["lhs dimension 2 out of range for rank 2"],
    );
    err(
        &dot(&[1], &[1], &[], &[], None),
        &[t(F32, &[2, 3]), t(F32, &[3])],
        &["rhs dimension 1 out of range for rank 1"],
    );
    err(&bmm, &[t(F32, &[5, 2, 3]), t(F32, &[6, 3, 4])], &["batch dimensions", "size 5", "size 6"]);
    err(
        &dot(&[1], &[0], &[], &[], Some(Bool)),
        &[t(F32, &[2, 3]), t(F32, &[3, 4])],
        &["preferred_element_type bool"],
    );
}

// ---------------------------------------------------------------- indexing

#[test]
fn gather_rule() {
    let p = |axis, batch_dims| Prim::Gather { axis, batch_dims, mode: IndexMode::Clip };
    // operand (5,6), indices (3,): axis 0 -> (3,6); axis 1 -> (5,3).
    assert_eq!(ok1(&p(0, 0), &[t(F32, &[5, 6]), t(I32, &[3])]), t(F32, &[3, 6]));
    assert_eq!(ok1(&p(1, 0), &[t(F32, &[5, 6]), t(U32, &[3])]), t(F32, &[5, 3]));
    // scalar index drops the axis; 2-d indices insert two dims.
    assert_eq!(ok1(&p(0, 0), &[t(Bool, &[5, 6]), s(I32)]), t(Bool, &[6]));
    assert_eq!(ok1(&p(1, 0), &[t(F32, &[5, 6, 7]), t(I32, &[2, 3])]), t(F32, &[5, 2, 3, 7]));
    // batch_dims 1: operand (4,5,6), indices (4,2), axis 1 -> (4) ++ (2) ++ (6).
    let fill = Prim::Gather { axis: 1, batch_dims: 1, mode: IndexMode::FillOrDrop };
    assert_eq!(ok1(&fill, &[t(F32, &[4, 5, 6]), t(I32, &[4, 2])]), t(F32, &[4, 2, 6]));
    assert_eq!(ok1(&fill, &[t(F32, &[4, 5]), t(I32, &[4])]), t(F32, &[4]));

    err(&p(0, 0), &[t(F32, &[5]), t(F32, &[3])], &["indices dtype f32 is not i32 or u32"]);
    err(&p(0, 0), &[s(F32), t(I32, &[3])], &["rank >= 1"]);
    err(&p(2, 0), &[t(F32, &[5, 6]), t(I32, &[3])], &["axis 2 out of range for rank 2"]);
    err(&p(0, 1), &[t(F32, &[5, 6]), t(I32, &[5, 3])], &["batch_dims 1 exceeds axis 0"]);
    err(&p(1, 1), &[t(F32, &[5, 6]), s(I32)], &["batch_dims 1", "indices rank 0"]);
    err(&p(1, 1), &[t(F32, &[4, 5, 6]), t(I32, &[3, 2])], &["(4, 5, 6)", "(3, 2)"]);
    err(&p(0, 0), &[t(F32, &[5, 6])], &["expected 2 operands, got 1"]);
}

#[test]
fn scatter_rule() {
    for op in ScatterOp::ALL {
        for mode in [IndexMode::Clip, IndexMode::FillOrDrop] {
            let p = |axis, batch_dims| Prim::Scatter { op, axis, batch_dims, mode };
            let x = t(F32, &[5, 6]);
            assert_eq!(ok1(&p(0, 0), &[x.clone(), t(I32, &[3]), t(F32, &[3, 6])]), x);
            assert_eq!(ok1(&p(1, 0), &[x.clone(), s(U32), t(F32, &[5])]), x);
            let b = t(I32, &[4, 5, 6]);
            assert_eq!(ok1(&p(1, 1), &[b.clone(), t(I32, &[4, 2]), t(I32, &[4, 2, 6])]), b);
            err(
                &p(0, 0),
                &[x.clone(), t(I32, &[3]), t(F32, &[3, 5])],
                &["updates shape (3, 5) differs from the gathered shape (3, 6)"],
            );
            err(
                &p(0, 0),
                &[x.clone(), t(I32, &[3]), t(F64, &[3, 6])],
                &["updates dtype f64 differs from operand dtype f32"],
            );
            err(&p(0, 0), &[x.clone(), t(F32, &[3]), t(F32, &[3, 6])], &["indices dtype f32"]);
            err(&p(2, 0), &[x.clone(), t(I32, &[3]), t(F32, &[3, 6])], &["axis 2 out of range for rank 2"]);
            err(&p(0, 0), &[x.clone(), t(I32, &[3])], &["expected 3 operands, got 2"]);
            let bools = [t(Bool, &[5]), t(I32, &[2]), t(Bool, &[2])];
            match op {
                ScatterOp::Set => assert_eq!(ok1(&p(0, 0), &bools), t(Bool, &[5])),
                ScatterOp::Add => {
                    err(&p(0, 0), &bools, &["dtype bool is not a numeric type"]);
                }
            }
        }
    }
}

#[test]
fn segment_sum_rule() {
    let p = Prim::SegmentSum { num_segments: 3 };
    assert_eq!(ok1(&p, &[t(F32, &[6, 2]), t(I32, &[6])]), t(F32, &[3, 2]));
    assert_eq!(ok1(&p, &[t(U32, &[0]), t(U32, &[0])]), t(U32, &[3]));
    assert_eq!(
        ok1(&Prim::SegmentSum { num_segments: 0 }, &[t(F64, &[2, 1, 4]), t(I32, &[2])]),
        t(F64, &[0, 1, 4])
    );
    err(&p, &[t(F32, &[6, 2]), t(I32, &[5])], &["segment ids shape (5,) is not (6,)"]);
    err(&p, &[t(F32, &[6, 2]), t(I32, &[6, 1])], &["(6, 1)"]);
    err(&p, &[t(F32, &[6, 2]), t(F32, &[6])], &["segment ids dtype f32 is not i32 or u32"]);
    err(&p, &[t(Bool, &[6]), t(I32, &[6])], &["data dtype bool is not a numeric type"]);
    err(&p, &[s(F32), t(I32, &[1])], &["rank >= 1"]);
    err(&p, &[t(F32, &[6])], &["expected 2 operands, got 1"]);
}

#[test]
fn threefry2x32_rule() {
    let p = Prim::Threefry2x32;
    let x = t(U32, &[2, 3]);
    assert_eq!(ok(&p, &[x.clone(), x.clone(), x.clone(), x.clone()]), vec![x.clone(), x.clone()]);
    assert_eq!(ok(&p, &[s(U32), s(U32), s(U32), s(U32)]), vec![s(U32), s(U32)]);
    err(&p, &[x.clone(), x.clone(), t(I32, &[2, 3]), x.clone()], &["dtype i32 is not u32"]);
    err(&p, &[x.clone(), x.clone(), t(U32, &[3]), x.clone()], &["shapes (2, 3) and (3,) differ"]);
    err(&p, &[x.clone(), x.clone(), x.clone()], &["expected 4 operands, got 3"]);
}

#[test]
fn stop_gradient_rule() {
    for d in DType::ALL {
        assert_eq!(ok1(&Prim::StopGradient, &[t(d, &[0, 2])]), t(d, &[0, 2]));
    }
    err(&Prim::StopGradient, &[s(F32), s(F32)], &["expected 1 operand, got 2"]);
}

// ---------------------------------------------------------------- calls and control flow

#[test]
fn call_and_checkpoint_rule() {
    let body = sig(&[t(F32, &[3]), s(I32)], &[s(F64), t(Bool, &[2]), t(F32, &[3])]);
    for p in [Prim::Call { body: Box::new(body.clone()) }, Prim::Checkpoint { body: Box::new(body.clone()) }]
    {
        assert_eq!(ok(&p, &[t(F32, &[3]), s(I32)]), vec![s(F64), t(Bool, &[2]), t(F32, &[3])]);
        err(&p, &[t(F32, &[4]), s(I32)], &["body parameter 0 has type f32[3] but the operand is f32[4]"]);
        err(&p, &[t(F32, &[3])], &["body parameter count 2 differs from operand count 1"]);
    }
    // No parameters, no outputs.
    assert_eq!(ok(&Prim::Call { body: Box::new(Function::new()) }, &[]), vec![]);
}

#[test]
fn dangling_subfunction_variables_are_errors_not_panics() {
    let mut f = sig(&[s(F32)], &[]);
    f.params.push(Var(99));
    err(&Prim::Call { body: Box::new(f.clone()) }, &[s(F32), s(F32)], &["body parameter v99"]);
    let mut g = sig(&[s(F32)], &[]);
    g.outputs.push(Var(7));
    err(&Prim::Checkpoint { body: Box::new(g) }, &[s(F32)], &["body output v7"]);
}

#[test]
fn custom_jvp_call_rule() {
    let (x, n) = (t(F32, &[3]), s(I32));
    let fun = sig(&[x.clone(), n.clone()], &[s(F32)]);
    let jvp = sig(&[x.clone(), n.clone(), x.clone(), n.clone()], &[s(F32), s(F32)]);
    let p = |jvp: &Function| Prim::CustomJvpCall { fun: Box::new(fun.clone()), jvp: Box::new(jvp.clone()) };
    assert_eq!(ok(&p(&jvp), &[x.clone(), n.clone()]), vec![s(F32)]);
    err(&p(&jvp), &[x.clone(), s(U32)], &["fun parameter 1 has type i32[] but the operand is u32[]"]);
    let bad_params = sig(&[x.clone(), n.clone(), x.clone()], &[s(F32), s(F32)]);
    err(&p(&bad_params), &[x.clone(), n.clone()], &["jvp parameter count 3 differs", "count 4"]);
    let bad_tangent = sig(&[x.clone(), n.clone(), t(F32, &[4]), n.clone()], &[s(F32), s(F32)]);
    err(&p(&bad_tangent), &[x.clone(), n.clone()], &["jvp parameter 2 has type f32[4]", "f32[3]"]);
    let bad_outs = sig(&[x.clone(), n.clone(), x.clone(), n.clone()], &[s(F32), s(F64)]);
    err(&p(&bad_outs), &[x.clone(), n.clone()], &["jvp output 1 has type f64[]", "f32[]"]);
}

#[test]
fn custom_vjp_call_rule() {
    let x = t(F32, &[3]);
    let fun = sig(&[x.clone()], &[s(F32)]);
    // fwd returns the output then one residual i32[2]; bwd takes residual ++ cotangent, returns x's cotangent.
    let fwd = sig(&[x.clone()], &[s(F32), t(I32, &[2])]);
    let bwd = sig(&[t(I32, &[2]), s(F32)], &[x.clone()]);
    let p = |fwd: &Function, bwd: &Function| Prim::CustomVjpCall {
        fun: Box::new(fun.clone()),
        fwd: Box::new(fwd.clone()),
        bwd: Box::new(bwd.clone()),
    };
    assert_eq!(ok(&p(&fwd, &bwd), &[x.clone()]), vec![s(F32)]);
    // No residuals at all.
    let fwd0 = sig(&[x.clone()], &[s(F32)]);
    let bwd0 = sig(&[s(F32)], &[x.clone()]);
    assert_eq!(ok(&p(&fwd0, &bwd0), &[x.clone()]), vec![s(F32)]);

    err(&p(&fwd, &bwd), &[t(F32, &[4])], &["fun parameter 0 has type f32[3] but the operand is f32[4]"]);
    err(&p(&sig(&[t(F64, &[3])], &[s(F32)]), &bwd0), &[x.clone()], &["fwd parameter 0 has type f64[3]"]);
    err(&p(&sig(&[x.clone()], &[]), &bwd0), &[x.clone()], &["fwd has 0 outputs, fewer than fun's 1"]);
    err(
        &p(&sig(&[x.clone()], &[s(F64)]), &bwd0),
        &[x.clone()],
        &["fwd output 0 has type f64[] but the fun output is f32[]"],
    );
    err(
        &p(&fwd, &bwd0),
        &[x.clone()],
        &["bwd parameter count 1 differs from residual/cotangent type count 2"],
    );
    err(
        &p(&fwd, &sig(&[t(I32, &[2]), s(F32)], &[s(F32)])),
        &[x.clone()],
        &["bwd output 0 has type f32[]", "f32[3]"],
    );
}

fn scan(length: usize, num_consts: usize, num_carry: usize, body: &Function) -> Prim {
    Prim::Scan { length, reverse: false, num_consts, num_carry, body: Box::new(body.clone()) }
}

#[test]
fn scan_rule() {
    let (c, carry, xs) = (t(F32, &[2]), s(I32), t(F32, &[5, 3]));
    // body(consts f32[2], carry i32[], x f32[3]) -> (carry i32[], y f64[4]); ys stack to f64[5,4].
    let body = sig(&[c.clone(), carry.clone(), t(F32, &[3])], &[carry.clone(), t(F64, &[4])]);
    assert_eq!(
        ok(&scan(5, 1, 1, &body), &[c.clone(), carry.clone(), xs.clone()]),
        vec![s(I32), t(F64, &[5, 4])]
    );
    let rev =
        Prim::Scan { length: 5, reverse: true, num_consts: 1, num_carry: 1, body: Box::new(body.clone()) };
    assert_eq!(ok(&rev, &[c.clone(), carry.clone(), xs.clone()]), vec![s(I32), t(F64, &[5, 4])]);
    // length 0, no xs, scalar y: ys are f32[0].
    let b0 = sig(&[s(F32)], &[s(F32), s(F32)]);
    assert_eq!(ok(&scan(0, 0, 1, &b0), &[s(F32)]), vec![s(F32), t(F32, &[0])]);
    // Nothing at all.
    assert_eq!(ok(&scan(3, 0, 0, &Function::new()), &[]), vec![]);

    let bad_carry = sig(&[s(I32)], &[s(F32)]);
    let e = err(&scan(2, 0, 1, &bad_carry), &[s(I32)], &["carry"]);
    assert_eq!(e.message, "body carry output 0 has type f32[] but the carry input is i32[]");
    err(
        &scan(4, 1, 1, &body),
        &[c.clone(), carry.clone(), xs.clone()],
        &["xs 0 has shape (5, 3)", "length 4"],
    );
    err(&scan(5, 1, 1, &body), &[c.clone(), carry.clone(), s(F32)], &["xs 0 has shape ()"]);
    err(
        &scan(5, 1, 1, &body),
        &[c.clone(), carry.clone(), t(F32, &[5, 4])],
        &["body parameter 2 has type f32[3]", "f32[4]"],
    );
    err(
        &scan(5, 1, 1, &sig(&[c.clone(), carry.clone(), t(F32, &[3])], &[])),
        &[c.clone(), carry.clone(), xs.clone()],
        &["fewer than the 1 carries"],
    );
    err(&scan(5, 2, 1, &body), &[c.clone(), carry.clone()], &["expected at least 2 + 1 operands, got 2"]);
    err(&scan(5, usize::MAX, 1, &body), &[c.clone()], &["operands, got 1"]);
}

fn while_loop(cond: &Function, body: &Function, cond_consts: usize, body_consts: usize) -> Prim {
    Prim::WhileLoop {
        cond: Box::new(cond.clone()),
        body: Box::new(body.clone()),
        cond_consts,
        body_consts,
        max_iters: None,
    }
}

#[test]
fn while_loop_rule() {
    let (cc, bc, st0, st1) = (s(F64), t(F32, &[2]), s(I32), t(F32, &[3]));
    let cond = sig(&[cc.clone(), st0.clone(), st1.clone()], &[s(Bool)]);
    let body = sig(&[bc.clone(), st0.clone(), st1.clone()], &[st0.clone(), st1.clone()]);
    let ops = [cc.clone(), bc.clone(), st0.clone(), st1.clone()];
    assert_eq!(ok(&while_loop(&cond, &body, 1, 1), &ops), vec![st0.clone(), st1.clone()]);
    let bounded = Prim::WhileLoop {
        cond: Box::new(cond.clone()),
        body: Box::new(body.clone()),
        cond_consts: 1,
        body_consts: 1,
        max_iters: Some(10),
    };
    assert_eq!(ok(&bounded, &ops), vec![st0.clone(), st1.clone()]);

    let cond_f32 = sig(&[cc.clone(), st0.clone(), st1.clone()], &[s(F32)]);
    err(
        &while_loop(&cond_f32, &body, 1, 1),
        &ops,
        &["cond output 0 has type f32[] but the required output is bool[]"],
    );
    let cond_vec = sig(&[cc.clone(), st0.clone(), st1.clone()], &[t(Bool, &[1])]);
    err(&while_loop(&cond_vec, &body, 1, 1), &ops, &["bool[1]", "bool[]"]);
    let cond_two = sig(&[cc.clone(), st0.clone(), st1.clone()], &[s(Bool), s(Bool)]);
    err(
        &while_loop(&cond_two, &body, 1, 1),
        &ops,
        &["cond output count 2 differs from required output count 1"],
    );
    let body_bad = sig(&[bc.clone(), st0.clone(), st1.clone()], &[st0.clone(), t(F32, &[4])]);
    err(
        &while_loop(&cond, &body_bad, 1, 1),
        &ops,
        &["body output 1 has type f32[4] but the state type is f32[3]"],
    );
    // Consts swapped: cond would see f32[2] where it wants f64[].
    err(
        &while_loop(&cond, &body, 1, 1),
        &[bc.clone(), cc.clone(), st0.clone(), st1.clone()],
        &["cond parameter 0"],
    );
    err(&while_loop(&cond, &body, 3, 2), &ops, &["expected at least 3 + 2 operands, got 4"]);
}

#[test]
fn cond_rule() {
    let args = [t(F32, &[3]), s(U32)];
    let b = sig(&args, &[s(F32), t(Bool, &[2])]);
    let p = |bs: Vec<Function>| Prim::Cond { branches: bs };
    let ops = [s(I32), args[0].clone(), args[1].clone()];
    assert_eq!(ok(&p(vec![b.clone()]), &ops), vec![s(F32), t(Bool, &[2])]);
    assert_eq!(ok(&p(vec![b.clone(), b.clone(), b.clone()]), &ops), vec![s(F32), t(Bool, &[2])]);
    assert_eq!(ok(&p(vec![Function::new()]), &[s(I32)]), vec![]);

    err(&p(vec![]), &ops, &["at least one branch"]);
    err(&p(vec![b.clone()]), &[], &["expected at least 1 operand, got 0"]);
    err(
        &p(vec![b.clone()]),
        &[s(U32), args[0].clone(), args[1].clone()],
        &["index has type u32[], not i32[]"],
    );
    err(&p(vec![b.clone()]), &[t(I32, &[1]), args[0].clone(), args[1].clone()], &["index has type i32[1]"]);
    let other = sig(&args, &[s(F64), t(Bool, &[2])]);
    err(
        &p(vec![b.clone(), other]),
        &ops,
        &["branch 1 output 0 has type f64[] but the branch 0 output is f32[]"],
    );
    let wrong_params = sig(&[t(F32, &[3])], &[s(F32), t(Bool, &[2])]);
    err(
        &p(vec![b.clone(), wrong_params]),
        &ops,
        &["branch 1 parameter count 1 differs from operand count 2"],
    );
}

// ---------------------------------------------------------------- coverage and robustness

/// Numbers every primitive variant; the exhaustive match (no `_`) stops this test file compiling when a
/// primitive is added, so it cannot go without a case in `one_case_per_primitive`.
fn variant_index(p: &Prim) -> usize {
    match p {
        Prim::Unary(_) => 0,
        Prim::Binary(_) => 1,
        Prim::Compare(_) => 2,
        Prim::Select => 3,
        Prim::Clamp => 4,
        Prim::ConvertElementType { .. } => 5,
        Prim::BitcastConvertType { .. } => 6,
        Prim::Iota { .. } => 7,
        Prim::BroadcastInDim { .. } => 8,
        Prim::Reshape { .. } => 9,
        Prim::Transpose { .. } => 10,
        Prim::Rev { .. } => 11,
        Prim::Slice { .. } => 12,
        Prim::DynamicSlice { .. } => 13,
        Prim::DynamicUpdateSlice => 14,
        Prim::Concatenate { .. } => 15,
        Prim::Pad { .. } => 16,
        Prim::Reduce { .. } => 17,
        Prim::ArgReduce { .. } => 18,
        Prim::Cumulative { .. } => 19,
        Prim::Sort { .. } => 20,
        Prim::DotGeneral { .. } => 21,
        Prim::Gather { .. } => 22,
        Prim::Scatter { .. } => 23,
        Prim::SegmentSum { .. } => 24,
        Prim::Threefry2x32 => 25,
        Prim::StopGradient => 26,
        Prim::CustomJvpCall { .. } => 27,
        Prim::CustomVjpCall { .. } => 28,
        Prim::Scan { .. } => 29,
        Prim::WhileLoop { .. } => 30,
        Prim::Cond { .. } => 31,
        Prim::Call { .. } => 32,
        Prim::Checkpoint { .. } => 33,
    }
}
const NUM_VARIANTS: usize = 34;

/// One well-typed application of every primitive: (prim, operands, expected results).
fn one_case_per_primitive() -> Vec<(Prim, Vec<TensorType>, Vec<TensorType>)> {
    let x = t(F32, &[2, 3]);
    let id = sig(&[x.clone()], &[x.clone()]);
    let bx = |f: &Function| Box::new(f.clone());
    vec![
        (Prim::Unary(UnaryOp::Log), vec![x.clone()], vec![x.clone()]),
        (Prim::Binary(BinaryOp::Atan2), vec![x.clone(), x.clone()], vec![x.clone()]),
        (Prim::Compare(CompareOp::Ge), vec![x.clone(), x.clone()], vec![t(Bool, &[2, 3])]),
        (Prim::Select, vec![s(Bool), x.clone(), x.clone()], vec![x.clone()]),
        (Prim::Clamp, vec![s(F32), x.clone(), s(F32)], vec![x.clone()]),
        (Prim::ConvertElementType { dtype: I32 }, vec![x.clone()], vec![t(I32, &[2, 3])]),
        (Prim::BitcastConvertType { dtype: U32 }, vec![x.clone()], vec![t(U32, &[2, 3])]),
        (Prim::Iota { dtype: F32, shape: Shape::new(&[2, 3]), dimension: 0 }, vec![], vec![x.clone()]),
        (bcast(&[2, 3], &[1]), vec![t(F32, &[3])], vec![x.clone()]),
        (Prim::Reshape { new_sizes: Shape::new(&[6]) }, vec![x.clone()], vec![t(F32, &[6])]),
        (Prim::Transpose { permutation: vec![1, 0] }, vec![x.clone()], vec![t(F32, &[3, 2])]),
        (Prim::Rev { dimensions: vec![0] }, vec![x.clone()], vec![x.clone()]),
        (slice(&[0, 1], &[2, 3], &[1, 1]), vec![x.clone()], vec![t(F32, &[2, 2])]),
        (
            Prim::DynamicSlice { slice_sizes: vec![1, 3] },
            vec![x.clone(), s(I32), s(I32)],
            vec![t(F32, &[1, 3])],
        ),
        (Prim::DynamicUpdateSlice, vec![x.clone(), t(F32, &[1, 3]), s(I32), s(I32)], vec![x.clone()]),
        (Prim::Concatenate { dimension: 1 }, vec![x.clone(), x.clone()], vec![t(F32, &[2, 6])]),
        (pad(&[0, 1], &[0, 0], &[0, 0]), vec![x.clone(), s(F32)], vec![t(F32, &[2, 4])]),
        (Prim::Reduce { op: ReduceOp::Sum, axes: vec![1] }, vec![x.clone()], vec![t(F32, &[2])]),
        (Prim::ArgReduce { op: ArgOp::Max, axis: 0, index_dtype: I32 }, vec![x.clone()], vec![t(I32, &[3])]),
        (
            Prim::Cumulative { op: CumulativeOp::Sum, axis: 1, reverse: false },
            vec![x.clone()],
            vec![x.clone()],
        ),
        (Prim::Sort { dimension: 1, num_keys: 1 }, vec![x.clone()], vec![x.clone()]),
        (dot(&[1], &[1], &[], &[], None), vec![x.clone(), x.clone()], vec![t(F32, &[2, 2])]),
        (
            Prim::Gather { axis: 0, batch_dims: 0, mode: IndexMode::Clip },
            vec![x.clone(), t(I32, &[4])],
            vec![t(F32, &[4, 3])],
        ),
        (
            Prim::Scatter { op: ScatterOp::Add, axis: 0, batch_dims: 0, mode: IndexMode::FillOrDrop },
            vec![x.clone(), t(I32, &[4]), t(F32, &[4, 3])],
            vec![x.clone()],
        ),
        (Prim::SegmentSum { num_segments: 5 }, vec![x.clone(), t(I32, &[2])], vec![t(F32, &[5, 3])]),
        (Prim::Threefry2x32, vec![s(U32); 4], vec![s(U32); 2]),
        (Prim::StopGradient, vec![x.clone()], vec![x.clone()]),
        (
            Prim::CustomJvpCall {
                fun: bx(&id),
                jvp: bx(&sig(&[x.clone(), x.clone()], &[x.clone(), x.clone()])),
            },
            vec![x.clone()],
            vec![x.clone()],
        ),
        (Prim::CustomVjpCall { fun: bx(&id), fwd: bx(&id), bwd: bx(&id) }, vec![x.clone()], vec![x.clone()]),
        (scan(4, 0, 0, &sig(&[t(F32, &[3])], &[s(F32)])), vec![t(F32, &[4, 3])], vec![t(F32, &[4])]),
        (while_loop(&sig(&[x.clone()], &[s(Bool)]), &id, 0, 0), vec![x.clone()], vec![x.clone()]),
        (Prim::Cond { branches: vec![id.clone(), id.clone()] }, vec![s(I32), x.clone()], vec![x.clone()]),
        (Prim::Call { body: bx(&id) }, vec![x.clone()], vec![x.clone()]),
        (Prim::Checkpoint { body: bx(&id) }, vec![x.clone()], vec![x.clone()]),
    ]
}

#[test]
fn every_primitive_has_an_ok_case() {
    let mut covered = [false; NUM_VARIANTS];
    for (prim, ins, want) in one_case_per_primitive() {
        assert_eq!(ok(&prim, &ins), want, "{}", prim.name());
        covered[variant_index(&prim)] = true;
    }
    assert!(covered.iter().all(|&c| c), "uncovered variants: {covered:?}");
}

/// Every primitive on many operand lists (wrong counts, ranks 0..4, empty and huge dims, every dtype)
/// gives Ok or Err — never a panic.
#[test]
fn no_panics_on_arbitrary_operands() {
    let huge = usize::MAX / 2 + 1;
    let pool: Vec<TensorType> = vec![
        s(F32),
        s(I32),
        s(U32),
        s(Bool),
        t(F32, &[0]),
        t(F32, &[2, 3]),
        t(I32, &[2]),
        t(F64, &[huge, 3]),
        t(U32, &[1, 2, 3, 4]),
    ];
    let mut prims: Vec<Prim> = one_case_per_primitive().into_iter().map(|(p, _, _)| p).collect();
    prims.extend([
        Prim::Reshape { new_sizes: Shape::new(&[huge, 4]) },
        pad(&[i64::MIN, 5], &[i64::MAX, -3], &[usize::MAX, 2]),
        slice(&[usize::MAX, 0], &[0, usize::MAX], &[0, usize::MAX]),
        Prim::Gather { axis: 5, batch_dims: 9, mode: IndexMode::Clip },
        Prim::Sort { dimension: 9, num_keys: usize::MAX },
        scan(usize::MAX, usize::MAX, usize::MAX, &Function::new()),
        dot(&[0, 0], &[9, 1], &[1], &[0], Some(Bool)),
        Prim::Cond { branches: vec![] },
        Prim::DynamicSlice { slice_sizes: vec![usize::MAX; 3] },
        bcast(&[usize::MAX, 0], &[1, 0]),
    ]);
    let mut n = 0;
    for prim in &prims {
        for a in 0..=pool.len() {
            for b in 0..=pool.len() {
                for c in 0..=pool.len() {
                    let ins: Vec<TensorType> =
                        [a, b, c].iter().filter_map(|&i| pool.get(i).cloned()).collect();
                    let _ = output_types(prim, &ins);
                    n += 1;
                }
            }
        }
    }
    assert!(n > 0);
}

#[test]
fn results_too_large_to_allocate_are_eval_errors_not_aborts() {
    // Regression: `eval_prim` allocated whatever the shape rule allowed, so an addressable but huge
    // result (here 2^56 f32 = 256 PiB, beyond any x86-64 address space) aborted the process.
    let big = t(F32, &[1 << 56]);
    assert_eq!(big.bytes(), 1 << 58);
    assert!(big.check_addressable().is_ok());
    let m = big.check_allocatable().unwrap_err();
    assert_eq!(m, "f32[72057594037927936] needs 256.0 PiB, more than this process can allocate");
    let prim = Prim::SegmentSum { num_segments: 1 << 56 };
    let data = Array::from_vec(&[2], vec![1.0f32, 2.0]);
    let ids = Array::from_vec(&[2], vec![0i32, 1]);
    match eval_prim(&prim, &[&data, &ids]) {
        Err(EvalError::OutOfMemory { prim: "segment_sum", message }) => assert_eq!(message, m),
        other => panic!("expected an out-of-memory error, got {other:?}"),
    }
    // The same primitive at a size that fits computes (probe threshold: sizes below it never probe).
    let out = eval_prim(&Prim::SegmentSum { num_segments: 3 }, &[&data, &ids]).unwrap();
    assert!(out[0].bitwise_eq(&Array::from_vec(&[3], vec![1.0f32, 2.0, 0.0])));
    assert!(t(F64, &[1 << 20]).check_allocatable().is_ok());
    // Sizes in messages, and the byte count of empty and overflowing types.
    let sizes =
        [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (3 << 29, "1.5 GiB"), (usize::MAX, "16.0 EiB")];
    for (bytes, text) in sizes {
        assert_eq!(human_bytes(bytes), text);
    }
    assert_eq!(t(F64, &[1 << 62, 0]).bytes(), 0);
    assert_eq!(t(F64, &[1 << 62, 4]).bytes(), usize::MAX);
}
