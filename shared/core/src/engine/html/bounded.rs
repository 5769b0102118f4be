//! The tree sink that keeps count while a tree is built: scraper's sink, counting each node and
//! the depth at which it is attached, and keeping an element's attributes within their cap.

use super::{
    too_deep, too_many, too_many_attributes, MAX_ATTRIBUTES, MAX_DEPTH, MAX_NODES,
    MAX_TREE_ATTRIBUTES,
};
use crate::engine::budget::Exceeded;
use ego_tree::{NodeId, Tree};
use html5ever::tendril::StrTendril;
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink, Node};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::hash::{Hash, Hasher};

/// Bytes of markup a node, under what nearly every documentation page has (the Python docs:
/// 23 overall, under 16.8 on 2% of pages).
const BYTES_PER_NODE: usize = 16;

/// Most nodes a tree is made ready for before its page is parsed (a page of more grows its
/// list as it goes): a large page of plain text reserves no more than this.
const MAX_PRESIZE: usize = 65_536;

/// How many nodes the tree of a page of `source_len` bytes is made ready for.
fn presize(source_len: usize) -> usize {
    (source_len / BYTES_PER_NODE).min(MAX_PRESIZE)
}

/// A node's index in its tree. ego_tree hands out ids in order (1 for the first node, one more
/// for each after it) and an id hashes as that one integer, which this hasher keeps: depths are
/// kept in a list by index, not in a map (one write for every node of every page).
fn index(id: &NodeId) -> usize {
    let mut raw = RawId(0);
    id.hash(&mut raw);
    usize::try_from(raw.0).unwrap_or(usize::MAX)
}

/// The hasher that keeps the integer it is given.
struct RawId(u64);

impl Hasher for RawId {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.wrapping_shl(8) | u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// scraper's tree sink, counting each node and the depth at which it is attached.
pub(super) struct Bounded {
    inner: HtmlTreeSink,
    /// Each placed node's depth, by [`index`].
    depth: RefCell<Vec<u32>>,
    nodes: Cell<usize>,
    attributes: Cell<usize>,
    deepest: Cell<usize>,
    /// Whether the tree builder moved a node that was already placed (and its subtree).
    moved: Cell<bool>,
}

impl Bounded {
    /// A sink for a document of `source_len` bytes: its tree's list of nodes is made at the
    /// size such a page usually needs (untouched capacity costs no memory), so that it is not
    /// copied to a larger one again and again as the page is built.
    pub(super) fn new(source_len: usize) -> Self {
        let capacity = presize(source_len);
        let mut html = Html::new_document();
        html.tree = Tree::with_capacity(Node::Document, capacity);
        Bounded {
            inner: HtmlTreeSink::new(html),
            depth: RefCell::new(Vec::with_capacity(capacity)),
            nodes: Cell::new(0),
            attributes: Cell::new(0),
            deepest: Cell::new(0),
            moved: Cell::new(false),
        }
    }

    /// Whether the tree so far is within [`MAX_DEPTH`], [`MAX_NODES`] and
    /// [`MAX_TREE_ATTRIBUTES`].
    pub(super) fn within_bounds(&self) -> Result<(), Exceeded> {
        if self.deepest.get() > MAX_DEPTH {
            return Err(too_deep());
        }
        if self.nodes.get() > MAX_NODES {
            return Err(too_many());
        }
        if self.attributes.get() > MAX_TREE_ATTRIBUTES {
            return Err(too_many_attributes());
        }
        Ok(())
    }

    /// Whether a node already placed was moved since (the depths counted as nodes arrived may
    /// then be wrong).
    pub(super) fn moved(&self) -> bool {
        self.moved.get()
    }

    fn depth(&self, node: &NodeId) -> usize {
        self.depth
            .borrow()
            .get(index(node))
            .map_or(0, |d| *d as usize)
    }

    /// Records that `child` now sits at `depth`.
    fn placed(&self, child: &NodeOrText<NodeId>, depth: usize) {
        match child {
            NodeOrText::AppendNode(id) => {
                let i = index(id);
                // The tree holds at most the nodes counted, a fragment for each template among
                // them and the document and its doctype: an index past that is not ego_tree's
                // (the test of the indices fails first), and is not let grow the list.
                if i <= 2 * self.nodes.get() + 2 {
                    let mut depths = self.depth.borrow_mut();
                    if depths.len() <= i {
                        depths.resize(i + 1, 0);
                    }
                    depths[i] = u32::try_from(depth).unwrap_or(u32::MAX);
                }
                self.deepest.set(self.deepest.get().max(depth));
            }
            NodeOrText::AppendText(_) => self.counted(),
        }
    }

    fn counted(&self) {
        self.nodes.set(self.nodes.get() + 1);
    }

    fn attributes_added(&self, n: usize) {
        self.attributes.set(self.attributes.get() + n);
    }
}

impl TreeSink for Bounded {
    type Handle = NodeId;
    type Output = Html;
    type ElemName<'a> = <HtmlTreeSink as TreeSink>::ElemName<'a>;

    fn finish(self) -> Html {
        self.inner.finish()
    }

    /// Parse errors are not kept: nothing reads them, and a page of millions of stray end tags
    /// would otherwise leave a list of millions beside its tree.
    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> NodeId {
        self.inner.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a NodeId) -> Self::ElemName<'a> {
        self.inner.elem_name(target)
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> NodeId {
        self.counted();
        self.attributes_added(attrs.len());
        self.inner.create_element(name, attrs, flags)
    }

    fn create_comment(&self, text: StrTendril) -> NodeId {
        self.counted();
        self.inner.create_comment(text)
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> NodeId {
        self.counted();
        self.inner.create_pi(target, data)
    }

    fn append(&self, parent: &NodeId, child: NodeOrText<NodeId>) {
        self.placed(&child, self.depth(parent) + 1);
        self.inner.append(parent, child)
    }

    fn append_based_on_parent_node(
        &self,
        element: &NodeId,
        prev_element: &NodeId,
        child: NodeOrText<NodeId>,
    ) {
        let depth = self.depth(element).max(self.depth(prev_element) + 1);
        self.placed(&child, depth);
        self.inner
            .append_based_on_parent_node(element, prev_element, child)
    }

    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id)
    }

    fn mark_script_already_started(&self, node: &NodeId) {
        self.inner.mark_script_already_started(node)
    }

    fn pop(&self, node: &NodeId) {
        self.inner.pop(node)
    }

    fn get_template_contents(&self, target: &NodeId) -> NodeId {
        self.inner.get_template_contents(target)
    }

    fn same_node(&self, x: &NodeId, y: &NodeId) -> bool {
        self.inner.same_node(x, y)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode)
    }

    fn append_before_sibling(&self, sibling: &NodeId, new_node: NodeOrText<NodeId>) {
        self.placed(&new_node, self.depth(sibling));
        self.inner.append_before_sibling(sibling, new_node)
    }

    /// The attributes of a second `<html>` or `<body>` tag the element lacks, while it has fewer
    /// than [`MAX_ATTRIBUTES`] (each is a sorted insert into its list).
    fn add_attrs_if_missing(&self, target: &NodeId, mut attrs: Vec<Attribute>) {
        let room = match self.inner.0.borrow().tree.get(*target).map(|n| n.value()) {
            Some(Node::Element(element)) => {
                let have = &element.attrs;
                attrs.retain(|a| !have.iter().any(|(name, _)| *name == a.name));
                MAX_ATTRIBUTES.saturating_sub(have.len())
            }
            _ => 0,
        };
        attrs.truncate(room);
        self.attributes_added(attrs.len());
        self.inner.add_attrs_if_missing(target, attrs)
    }

    fn associate_with_form(
        &self,
        target: &NodeId,
        form: &NodeId,
        nodes: (&NodeId, Option<&NodeId>),
    ) {
        self.inner.associate_with_form(target, form, nodes)
    }

    fn remove_from_parent(&self, target: &NodeId) {
        self.moved.set(true);
        self.inner.remove_from_parent(target)
    }

    fn reparent_children(&self, node: &NodeId, new_parent: &NodeId) {
        self.moved.set(true);
        self.inner.reparent_children(node, new_parent)
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &NodeId) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }

    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number)
    }

    fn allow_declarative_shadow_roots(&self, intended_parent: &NodeId) -> bool {
        self.inner.allow_declarative_shadow_roots(intended_parent)
    }

    fn attach_declarative_shadow(
        &self,
        location: &NodeId,
        template: &NodeId,
        attrs: &[Attribute],
    ) -> bool {
        self.inner
            .attach_declarative_shadow(location, template, attrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::budget::Budget;

    #[test]
    fn a_tree_is_made_ready_for_its_page_within_a_bound() {
        // A documentation page (23 bytes a node) does not outgrow its list; 10 MiB of text
        // reserves no more than a large page of markup.
        assert!(presize(123_000) >= 123_000 / 23);
        assert_eq!(presize(10 << 20), MAX_PRESIZE);
    }

    #[test]
    fn a_node_id_gives_its_index_in_the_tree() {
        let src = "<!DOCTYPE html><template><p>t</p></template><p>a<!-- c --><b>b</b></p>";
        let html = super::super::parse(src, &Budget::unlimited()).unwrap();
        let indices: Vec<usize> = html.tree.nodes().map(|n| index(&n.id())).collect();
        assert_eq!(indices, (1..=indices.len()).collect::<Vec<_>>());
        assert!(indices.len() > 10);
    }

    #[test]
    fn templates_do_not_hide_depth() {
        // Each template adds a node the count leaves out (its contents' fragment).
        let src = format!(
            "<html><body>{}{}x",
            "<template></template>".repeat(5_000),
            "<div>".repeat(20_000)
        );
        assert!(matches!(
            super::super::parse(&src, &Budget::unlimited()),
            Err(Exceeded::TooComplex(_))
        ));
    }
}
