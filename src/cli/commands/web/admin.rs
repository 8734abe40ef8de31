//! The Grants and tokens page (the admin only; 403 for anyone else, as the library refuses
//! them): who may read and write which scopes, and the HTTP tokens by id and principal.

use somna::text::date_of;
use somna::Error;

use super::html::esc;
use super::{Cx, Out};

/// `GET /ui/admin`.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let grants = cx.store.grants()?;
    let tokens = cx.store.tokens()?;
    let mut body = String::from(
        "<h2>Grants</h2><table><thead><tr><th scope=\"col\">Principal</th><th scope=\"col\">Access</th>\
         <th scope=\"col\">Scope</th><th scope=\"col\">Granted by</th></tr></thead><tbody>",
    );
    for g in &grants {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.principal),
            esc(&g.access.to_string()),
            esc(&g.scope),
            esc(&g.granted_by)
        ));
    }
    body.push_str(
        "</tbody></table><h2>Tokens</h2><table><thead><tr><th scope=\"col\">Id</th>\
         <th scope=\"col\">Principal</th><th scope=\"col\">Created</th><th scope=\"col\">By</th></tr></thead><tbody>",
    );
    for t in &tokens {
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&t.id),
            esc(&t.principal),
            esc(&date_of(t.created_us)),
            esc(&t.created_by)
        ));
    }
    body.push_str("</tbody></table>");
    Ok(Out::Page("Grants and tokens".into(), body))
}
