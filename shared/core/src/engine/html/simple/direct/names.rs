//! The sets of names that the standard's tree construction treats alike, as far as the direct
//! builder needs them, and SVG's spellings of its names.

use html5ever::tokenizer::states::RawKind;
use html5ever::{local_name, namespace_prefix, ns, Attribute, LocalName, QualName};

/// Elements whose start tag closes an open `<p>` (in button scope), then opens as usual.
pub(super) fn closes_p(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("address")
            | local_name!("article")
            | local_name!("aside")
            | local_name!("blockquote")
            | local_name!("center")
            | local_name!("details")
            | local_name!("dialog")
            | local_name!("dir")
            | local_name!("div")
            | local_name!("dl")
            | local_name!("fieldset")
            | local_name!("figcaption")
            | local_name!("figure")
            | local_name!("footer")
            | local_name!("header")
            | local_name!("hgroup")
            | local_name!("main")
            | local_name!("menu")
            | local_name!("nav")
            | local_name!("ol")
            | local_name!("p")
            | local_name!("search")
            | local_name!("section")
            | local_name!("summary")
            | local_name!("ul")
    )
}

pub(super) fn is_heading(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("h1")
            | local_name!("h2")
            | local_name!("h3")
            | local_name!("h4")
            | local_name!("h5")
            | local_name!("h6")
    )
}

/// Elements with no content: inserted and closed at once.
pub(super) fn is_void(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("area")
            | local_name!("br")
            | local_name!("embed")
            | local_name!("img")
            | local_name!("keygen")
            | local_name!("wbr")
            | local_name!("input")
            | local_name!("param")
            | local_name!("source")
            | local_name!("track")
            | local_name!("base")
            | local_name!("basefont")
            | local_name!("bgsound")
            | local_name!("link")
            | local_name!("meta")
    )
}

/// How the text of an element is read, for those read raw.
pub(super) fn raw_kind(name: &LocalName) -> Option<RawKind> {
    match *name {
        local_name!("script") => Some(RawKind::ScriptData),
        // (`noscript` too: html5ever parses as a browser with scripts does.)
        local_name!("style") | local_name!("noframes") | local_name!("noscript") => {
            Some(RawKind::Rawtext)
        }
        local_name!("title") => Some(RawKind::Rcdata),
        _ => None,
    }
}

/// Start tags whose rules in `<body>` do more than the direct builder follows (it follows those
/// of forms, headings, list items, buttons and SVG itself), or whose content it does not.
pub(super) fn has_own_rules(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("html")
            | local_name!("head")
            | local_name!("body")
            | local_name!("frameset")
            | local_name!("frame")
            | local_name!("template")
            | local_name!("plaintext")
            | local_name!("textarea")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("nobr")
            | local_name!("image")
            | local_name!("applet")
            | local_name!("marquee")
            | local_name!("object")
            | local_name!("select")
            | local_name!("optgroup")
            | local_name!("option")
            | local_name!("rb")
            | local_name!("rtc")
            | local_name!("rp")
            | local_name!("rt")
            | local_name!("math")
            | local_name!("caption")
            | local_name!("col")
            | local_name!("colgroup")
            | local_name!("tbody")
            | local_name!("thead")
            | local_name!("tfoot")
            | local_name!("tr")
            | local_name!("td")
            | local_name!("th")
    )
}

/// The table's own elements, in which text and elements other than their children would be
/// moved out of the table (foster parenting).
pub(super) fn is_table_part(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("table")
            | local_name!("tbody")
            | local_name!("thead")
            | local_name!("tfoot")
            | local_name!("tr")
            | local_name!("colgroup")
    )
}

/// End tags whose rules close the elements whose end tags may be left out (paragraphs and
/// items) before their own element.
pub(super) fn closes_open_p(name: &LocalName) -> bool {
    closes_p(name)
        || matches!(
            *name,
            local_name!("button")
                | local_name!("listing")
                | local_name!("pre")
                | local_name!("li")
                | local_name!("dd")
                | local_name!("dt")
                | local_name!("td")
                | local_name!("th")
                | local_name!("caption")
        )
}

/// Start tags that end an `<svg>` (HTML's elements), or whose content is HTML again.
pub(super) fn leaves_svg(name: &LocalName) -> bool {
    is_heading(name)
        || matches!(
            *name,
            local_name!("b")
                | local_name!("big")
                | local_name!("blockquote")
                | local_name!("body")
                | local_name!("br")
                | local_name!("center")
                | local_name!("code")
                | local_name!("dd")
                | local_name!("div")
                | local_name!("dl")
                | local_name!("dt")
                | local_name!("em")
                | local_name!("embed")
                | local_name!("head")
                | local_name!("hr")
                | local_name!("i")
                | local_name!("img")
                | local_name!("li")
                | local_name!("listing")
                | local_name!("menu")
                | local_name!("meta")
                | local_name!("nobr")
                | local_name!("ol")
                | local_name!("p")
                | local_name!("pre")
                | local_name!("ruby")
                | local_name!("s")
                | local_name!("small")
                | local_name!("span")
                | local_name!("strong")
                | local_name!("strike")
                | local_name!("sub")
                | local_name!("sup")
                | local_name!("table")
                | local_name!("tt")
                | local_name!("u")
                | local_name!("ul")
                | local_name!("var")
                | local_name!("font")
                | local_name!("foreignobject")
                | local_name!("desc")
                | local_name!("title")
                | local_name!("math")
        )
}

/// SVG's element names with capitals (the tokenizer lowercases every name).
const SVG_NAMES: &[&str] = &[
    "altGlyph",
    "altGlyphDef",
    "altGlyphItem",
    "animateColor",
    "animateMotion",
    "animateTransform",
    "clipPath",
    "feBlend",
    "feColorMatrix",
    "feComponentTransfer",
    "feComposite",
    "feConvolveMatrix",
    "feDiffuseLighting",
    "feDisplacementMap",
    "feDistantLight",
    "feDropShadow",
    "feFlood",
    "feFuncA",
    "feFuncB",
    "feFuncG",
    "feFuncR",
    "feGaussianBlur",
    "feImage",
    "feMerge",
    "feMergeNode",
    "feMorphology",
    "feOffset",
    "fePointLight",
    "feSpecularLighting",
    "feSpotLight",
    "feTile",
    "feTurbulence",
    "foreignObject",
    "glyphRef",
    "linearGradient",
    "radialGradient",
    "textPath",
];

/// SVG's attribute names with capitals.
const SVG_ATTRIBUTES: &[&str] = &[
    "attributeName",
    "attributeType",
    "baseFrequency",
    "baseProfile",
    "calcMode",
    "clipPathUnits",
    "diffuseConstant",
    "edgeMode",
    "filterUnits",
    "glyphRef",
    "gradientTransform",
    "gradientUnits",
    "kernelMatrix",
    "kernelUnitLength",
    "keyPoints",
    "keySplines",
    "keyTimes",
    "lengthAdjust",
    "limitingConeAngle",
    "markerHeight",
    "markerUnits",
    "markerWidth",
    "maskContentUnits",
    "maskUnits",
    "numOctaves",
    "pathLength",
    "patternContentUnits",
    "patternTransform",
    "patternUnits",
    "pointsAtX",
    "pointsAtY",
    "pointsAtZ",
    "preserveAlpha",
    "preserveAspectRatio",
    "primitiveUnits",
    "refX",
    "refY",
    "repeatCount",
    "repeatDur",
    "requiredExtensions",
    "requiredFeatures",
    "specularConstant",
    "specularExponent",
    "spreadMethod",
    "startOffset",
    "stdDeviation",
    "stitchTiles",
    "surfaceScale",
    "systemLanguage",
    "tableValues",
    "targetX",
    "targetY",
    "textLength",
    "viewBox",
    "viewTarget",
    "xChannelSelector",
    "yChannelSelector",
    "zoomAndPan",
];

/// The spelling in `names` of a lowercase name, if it has one there.
fn spelled(names: &[&str], name: &LocalName) -> Option<LocalName> {
    names
        .iter()
        .find(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
        .map(|n| LocalName::from(*n))
}

/// An SVG element's name as SVG spells it.
pub(super) fn svg_name(name: LocalName) -> LocalName {
    spelled(SVG_NAMES, &name).unwrap_or(name)
}

/// An SVG element's attributes, named as SVG spells them, those of the XLink, XML and XMLNS
/// namespaces in theirs.
pub(super) fn svg_attributes(mut attrs: Vec<Attribute>) -> Vec<Attribute> {
    for attr in &mut attrs {
        let local = &attr.name.local;
        if let Some(name) = spelled(SVG_ATTRIBUTES, local) {
            attr.name = QualName::new(None, ns!(), name);
            continue;
        }
        let (prefix, rest) = match local.split_once(':') {
            Some((prefix, rest)) => (prefix, rest),
            None => ("", &**local),
        };
        attr.name = match (prefix, rest) {
            ("xlink", "actuate" | "arcrole" | "href" | "role" | "show" | "title" | "type") => {
                QualName::new(
                    Some(namespace_prefix!("xlink")),
                    ns!(xlink),
                    LocalName::from(rest),
                )
            }
            ("xml", "lang" | "space") => QualName::new(
                Some(namespace_prefix!("xml")),
                ns!(xml),
                LocalName::from(rest),
            ),
            ("", "xmlns") => QualName::new(
                Some(namespace_prefix!("")),
                ns!(xmlns),
                local_name!("xmlns"),
            ),
            ("xmlns", "xlink") => QualName::new(
                Some(namespace_prefix!("xmlns")),
                ns!(xmlns),
                local_name!("xlink"),
            ),
            _ => continue,
        };
    }
    attrs
}

/// Whether `child` may open in the table part `parent` as it stands.
pub(super) fn opens_in_table_part(parent: &LocalName, child: &LocalName) -> bool {
    matches!(
        (parent, child),
        (
            &local_name!("table"),
            &local_name!("caption")
                | &local_name!("colgroup")
                | &local_name!("tbody")
                | &local_name!("thead")
                | &local_name!("tfoot")
        ) | (
            &local_name!("tbody") | &local_name!("thead") | &local_name!("tfoot"),
            &local_name!("tr")
        ) | (&local_name!("tr"), &local_name!("td") | &local_name!("th"))
            | (&local_name!("colgroup"), &local_name!("col"))
    )
}

/// The limits of the default scope (the elements this builder opens among them), and of the
/// button scope with `button`.
pub(super) fn bounds_scope(name: &LocalName, button: bool) -> bool {
    matches!(
        *name,
        local_name!("caption")
            | local_name!("html")
            | local_name!("table")
            | local_name!("td")
            | local_name!("th")
    ) || (button && *name == local_name!("button"))
}

/// The standard's special elements, less `address`, `div` and `p`: where the search for an
/// open `<li>`, `<dd>` or `<dt>` to close stops.
pub(super) fn stops_item_search(name: &LocalName) -> bool {
    is_heading(name)
        || matches!(
            *name,
            local_name!("applet")
                | local_name!("area")
                | local_name!("article")
                | local_name!("aside")
                | local_name!("base")
                | local_name!("basefont")
                | local_name!("bgsound")
                | local_name!("blockquote")
                | local_name!("body")
                | local_name!("br")
                | local_name!("button")
                | local_name!("caption")
                | local_name!("center")
                | local_name!("col")
                | local_name!("colgroup")
                | local_name!("dd")
                | local_name!("details")
                | local_name!("dir")
                | local_name!("dl")
                | local_name!("dt")
                | local_name!("embed")
                | local_name!("fieldset")
                | local_name!("figcaption")
                | local_name!("figure")
                | local_name!("footer")
                | local_name!("form")
                | local_name!("frame")
                | local_name!("frameset")
                | local_name!("head")
                | local_name!("header")
                | local_name!("hgroup")
                | local_name!("hr")
                | local_name!("html")
                | local_name!("iframe")
                | local_name!("img")
                | local_name!("input")
                | local_name!("isindex")
                | local_name!("li")
                | local_name!("link")
                | local_name!("listing")
                | local_name!("main")
                | local_name!("marquee")
                | local_name!("menu")
                | local_name!("meta")
                | local_name!("nav")
                | local_name!("noembed")
                | local_name!("noframes")
                | local_name!("noscript")
                | local_name!("object")
                | local_name!("ol")
                | local_name!("param")
                | local_name!("plaintext")
                | local_name!("pre")
                | local_name!("script")
                | local_name!("section")
                | local_name!("select")
                | local_name!("source")
                | local_name!("style")
                | local_name!("summary")
                | local_name!("table")
                | local_name!("tbody")
                | local_name!("td")
                | local_name!("template")
                | local_name!("textarea")
                | local_name!("tfoot")
                | local_name!("th")
                | local_name!("thead")
                | local_name!("title")
                | local_name!("tr")
                | local_name!("track")
                | local_name!("ul")
                | local_name!("wbr")
                | local_name!("xmp")
        )
}
