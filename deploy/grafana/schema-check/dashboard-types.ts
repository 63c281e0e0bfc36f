// The shape a sustain dashboard must have, built from Grafana's own generated types
// (@grafana/schema, pinned to the Grafana release docker-compose.yml runs). Each dashboard is
// written out as a TypeScript literal of type SustainDashboard (tests/deploy/test_grafana_schema.py)
// and `tsc --strict` must accept it: unknown keys, wrong types and values outside an enum fail.
//
// Two things @grafana/schema leaves open are closed here: a panel's `options` and its field
// config's `custom` are typed per panel type (the panel plugins' generated Options/FieldConfig),
// and targets are Prometheus queries (fields of Grafana's prometheus dataquery schema). Enums
// are compared by value: a dashboard is JSON, so it holds "absolute", never ThresholdsMode.Absolute.

import type {
  DataQuery,
  DataSourceRef,
  Dashboard,
  FieldConfig,
  FieldConfigSource,
  Panel,
} from "@grafana/schema";
import type * as bargauge from "@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen.js";
import type * as stat from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen.js";
import type * as table from "@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen.js";
import type * as timeseries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen.js";

/** T as JSON holds it: string enums become the union of their values, recursively. */
export type Json<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Json<U>>
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

/** Every field optional, at every depth: panel plugins fill what a dashboard leaves out from
 * their defaults (the generated types mark defaulted fields required), but a field that is
 * present must still have the right type and a known name. */
export type Defaulted<T> = T extends ReadonlyArray<infer U>
  ? Array<Defaulted<U>>
  : T extends object
    ? { [K in keyof T]?: Defaulted<T[K]> }
    : T;

/** A Prometheus target: Grafana's prometheus dataquery fields, nothing else. */
export interface PrometheusQuery extends Omit<DataQuery, "datasource" | "key"> {
  datasource?: DataSourceRef;
  expr: string;
  instant?: boolean;
  range?: boolean;
  exemplar?: boolean;
  editorMode?: "code" | "builder";
  format?: "time_series" | "table" | "heatmap";
  legendFormat?: string;
  intervalFactor?: number;
  interval?: string;
}

/** Field config whose `custom` is the panel plugin's own FieldConfig (or nothing). */
type TypedFieldConfigSource<Custom> = Omit<FieldConfigSource, "defaults" | "overrides"> & {
  defaults: Omit<FieldConfig, "custom"> & { custom?: Custom };
  overrides: FieldConfigSource["overrides"];
};

/** A panel of plugin `Type`, with that plugin's Options and FieldConfig. */
type TypedPanel<Type extends string, Options, Custom> = Omit<
  Panel,
  "type" | "options" | "fieldConfig" | "targets"
> & {
  type: Type;
  options?: Defaulted<Options>;
  fieldConfig?: TypedFieldConfigSource<Defaulted<Custom>>;
  targets?: PrometheusQuery[];
};

/** Panel types sustain's dashboards use; a panel of any other type does not type-check. */
export type SustainPanel =
  | TypedPanel<"timeseries", timeseries.Options, timeseries.FieldConfig>
  | TypedPanel<"stat", stat.Options, Record<string, never>>
  | TypedPanel<"table", table.Options, table.FieldConfig>
  | TypedPanel<"bargauge", bargauge.Options, Record<string, never>>;

export type SustainDashboard = Json<Omit<Dashboard, "panels"> & { panels: SustainPanel[] }>;
