//! Flow control per key (API 1g): `setFlowLimit`, `getFlows`,
//! `delFlowLimit`. The work is [`xtimer_service::flows`]'s.

use axum::extract::State;
use serde::{Deserialize, Deserializer, Serialize};
use xtimer_service::flows::{Flow, FlowChange};

use super::when::AppRef;
use crate::extract::{ApiJson, ForApp, QueryOrJson};
use crate::{ApiError, AppState, Envelope};

crate::of_app!(SetFlowLimit, FlowRef);

/// Body of `setFlowLimit`: a field left out keeps the flow's value; a
/// `null` rate or parallelism removes it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetFlowLimit {
    /// The app.
    pub app: String,
    /// The flow's key (a timer's `notifyHTTPParam.flowKey`, else its
    /// target's `host:port`).
    pub key: String,
    /// Callbacks per second across the cluster, above 0 and at most 100,000.
    #[serde(default, deserialize_with = "present")]
    pub rate_per_sec: Option<Option<f64>>,
    /// Callbacks open at once across the cluster, at least 1.
    #[serde(default, deserialize_with = "present")]
    pub parallelism: Option<Option<i64>>,
    /// Whether its fires are held.
    #[serde(default)]
    pub paused: Option<bool>,
}

/// A field that is present, `null` or not.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A flow as `getFlows` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = Flow)]
#[serde(rename_all = "camelCase")]
pub struct FlowEntry {
    /// Its key.
    pub key: String,
    /// Callbacks per second; null: no rate.
    pub rate_per_sec: Option<f64>,
    /// Callbacks open at once; null: no cap.
    pub parallelism: Option<u32>,
    /// Whether its fires are held.
    pub paused: bool,
    /// Its fires waiting, on every node.
    pub waiting: u64,
    /// Its callbacks open now.
    pub in_flight: u64,
}

impl From<Flow> for FlowEntry {
    fn from(flow: Flow) -> Self {
        Self {
            key: flow.limit.key,
            rate_per_sec: flow.limit.rate_per_sec,
            parallelism: flow.limit.parallelism,
            paused: flow.limit.paused,
            waiting: flow.figures.waiting,
            in_flight: flow.figures.in_flight,
        }
    }
}

/// `{"list": [...]}`: the reply of `getFlows`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FlowList {
    /// The app's flows with limits, by key.
    pub list: Vec<FlowEntry>,
}

/// A flow as `delFlowLimit` names it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct FlowRef {
    /// The app.
    pub app: String,
    /// The flow's key.
    pub key: String,
}

/// The reply of `delFlowLimit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct FlowDeleted {
    /// The flow's key.
    pub key: String,
    /// Whether it had limits.
    pub deleted: bool,
}

/// `POST setFlowLimit`: sets a flow's rate, parallelism or pause; the
/// flow as it is now.
#[utoipa::path(
    post,
    path = "/setFlowLimit",
    operation_id = "setFlowLimit",
    summary = "Set a flow's rate, parallelism or pause, across the cluster: its fires over them wait.",
    request_body = SetFlowLimit,
    responses((status = 200, description = crate::replies::ENVELOPED, body = FlowEntry))
)]
pub async fn flow_set(
    State(state): State<AppState>,
    ForApp(input, _): ForApp<ApiJson<SetFlowLimit>>,
) -> Result<Envelope<FlowEntry>, ApiError> {
    let change = FlowChange { rate_per_sec: input.rate_per_sec, parallelism: input.parallelism, paused: input.paused };
    let flow = state.service.set_flow_limit(&input.app, &input.key, change).await?;
    Ok(Envelope(flow.into()))
}

/// `GET getFlows`: an app's flows with limits, their waiting fires and
/// open callbacks.
#[utoipa::path(
    get,
    path = "/getFlows",
    operation_id = "getFlows",
    summary = "An app's flows with limits, their waiting fires and open callbacks.",
    params(super::when::AppRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = FlowList))
)]
pub async fn flows_list(
    State(state): State<AppState>,
    ForApp(r, _): ForApp<QueryOrJson<AppRef>>,
) -> Result<Envelope<FlowList>, ApiError> {
    let flows = state.service.flows(&r.app).await?;
    Ok(Envelope(FlowList { list: flows.into_iter().map(FlowEntry::from).collect() }))
}

/// `DELETE delFlowLimit`: removes a flow's limits; its waiting fires go.
#[utoipa::path(
    delete,
    path = "/delFlowLimit",
    operation_id = "delFlowLimit",
    summary = "Remove a flow's limits: its waiting fires go.",
    params(FlowRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = FlowDeleted))
)]
pub async fn flow_delete(
    State(state): State<AppState>,
    ForApp(r, _): ForApp<QueryOrJson<FlowRef>>,
) -> Result<Envelope<FlowDeleted>, ApiError> {
    let deleted = state.service.delete_flow_limit(&r.app, &r.key).await?;
    Ok(Envelope(FlowDeleted { key: r.key, deleted }))
}
