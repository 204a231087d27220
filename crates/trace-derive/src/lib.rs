//! `#[derive(Tree)]`: makes a struct of tensors a kiln pytree.
//!
//! Every field must implement `kiln_trace::Tree` (tensors, tuples, `Vec`s, other derived structs),
//! except fields marked `#[tree(skip)]` (static, non-array data such as sizes or names), which are
//! cloned from the template when a tree is rebuilt and take part in the structure description through
//! their `Debug` form (so two values with different static fields have different structures, as JAX's
//! static pytree metadata). Named-field and tuple structs are supported; enums and unions are not.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Index, parse_macro_input};

/// Derives `kiln_trace::Tree` for a struct. See the crate docs.
#[proc_macro_derive(Tree, attributes(tree))]
pub fn derive_tree(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn is_skipped(field: &syn::Field) -> syn::Result<bool> {
    let mut skip = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("tree")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") || meta.path.is_ident("static") {
                skip = true;
                Ok(())
            } else {
                Err(meta.error("unknown tree attribute; expected `skip` (or its alias `static`)"))
            }
        })?;
    }
    Ok(skip)
}

/// The path through which the calling crate reaches kiln's tracer: `kiln_trace` when it depends on
/// it directly, otherwise the `kiln` facade (which re-exports `Tensor` and `Tree` at its root).
fn kiln_path() -> proc_macro2::TokenStream {
    use proc_macro_crate::{FoundCrate, crate_name};
    match crate_name("kiln-trace") {
        // `::kiln_trace` also works inside kiln-trace itself (`extern crate self as kiln_trace`) and in
        // its doc-tests and integration tests, where `crate` would name the wrong crate.
        Ok(FoundCrate::Itself) => return quote! { ::kiln_trace },
        Ok(FoundCrate::Name(n)) => {
            let id = format_ident!("{}", n);
            return quote! { ::#id };
        }
        Err(_) => {}
    }
    match crate_name("kiln") {
        Ok(FoundCrate::Itself) => quote! { ::kiln },
        Ok(FoundCrate::Name(n)) => {
            let id = format_ident!("{}", n);
            quote! { ::#id }
        }
        Err(_) => quote! { ::kiln_trace },
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let k = kiln_path();
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(name, "#[derive(Tree)] supports structs only"));
    };
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut flatten = Vec::new();
    let mut rebuild = Vec::new();
    let mut describe = Vec::new();
    let members: Vec<(syn::Member, String, bool)> = match &data.fields {
        Fields::Named(f) => f
            .named
            .iter()
            .map(|fl| {
                let id = fl.ident.clone().expect("named field");
                Ok((syn::Member::Named(id.clone()), id.to_string(), is_skipped(fl)?))
            })
            .collect::<syn::Result<_>>()?,
        Fields::Unnamed(f) => f
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, fl)| Ok((syn::Member::Unnamed(Index::from(i)), i.to_string(), is_skipped(fl)?)))
            .collect::<syn::Result<_>>()?,
        Fields::Unit => Vec::new(),
    };
    for (i, (member, label, skip)) in members.iter().enumerate() {
        let sep = if i == 0 { format!("{label}: ") } else { format!(", {label}: ") };
        let tmp = format_ident!("__f{}", i);
        if *skip {
            rebuild.push(quote! { let #tmp = ::core::clone::Clone::clone(&self.#member); });
            describe.push(quote! {
                out.push_str(#sep);
                out.push_str(&::std::format!("{:?}", self.#member));
            });
        } else {
            flatten.push(quote! { #k::Tree::flatten_into(&self.#member, out); });
            rebuild.push(quote! { let #tmp = #k::Tree::unflatten_from(&self.#member, leaves); });
            describe.push(quote! {
                out.push_str(#sep);
                #k::Tree::describe(&self.#member, out);
            });
        }
    }
    let tmps: Vec<_> = (0..members.len()).map(|i| format_ident!("__f{}", i)).collect();
    let construct = match &data.fields {
        Fields::Named(_) => {
            let names: Vec<_> = members.iter().map(|(m, _, _)| m.clone()).collect();
            quote! { #name { #(#names: #tmps),* } }
        }
        Fields::Unnamed(_) => quote! { #name ( #(#tmps),* ) },
        Fields::Unit => quote! { #name },
    };
    let label = name.to_string();
    Ok(quote! {
        impl #impl_generics #k::Tree for #name #ty_generics #where_clause {
            fn flatten_into(&self, out: &mut ::std::vec::Vec<#k::Tensor>) {
                let _ = &out;
                #(#flatten)*
            }
            fn unflatten_from(
                &self,
                leaves: &mut dyn ::core::iter::Iterator<Item = #k::Tensor>,
            ) -> Self {
                let _ = &leaves;
                #(#rebuild)*
                #construct
            }
            fn describe(&self, out: &mut ::std::string::String) {
                out.push_str(#label);
                out.push('{');
                #(#describe)*
                out.push('}');
            }
        }
    })
}
