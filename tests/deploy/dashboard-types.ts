// Types the dashboards in grafana/dashboards/ are checked against
// (tests/deploy/test_dashboards.py writes each dashboard as an object
// literal of type `PerfDashboard` and runs tsc --strict on it).
//
// The dashboard model is @grafana/schema's `Dashboard`. Its `Panel` leaves
// `options` and `targets` untyped, so each panel type used here is narrowed
// to the `Options` (and field `custom` config) of that panel's own schema in
// @grafana/schema, and every query to a Prometheus query. Object literals get
// TypeScript's excess-property check: a misspelt or unknown key is an error.
import type * as schema from "@grafana/schema";
import type * as TimeSeries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";
import type * as Stat from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen";
import type * as BarGauge from "@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen";
import type * as Table from "@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen";

// JSON cannot hold enum members, only their values: accept the value of
// every enum (string or numeric) wherever the schema names the enum.
type Json<T> = T extends string
  ? `${T}`
  : T extends number
    ? `${T}` extends `${infer N extends number}`
      ? N
      : number
    : T extends boolean
      ? T
      : T extends ReadonlyArray<infer U>
        ? Array<Json<U>>
        : T extends object
          ? { [K in keyof T]: Json<T[K]> }
          : T;

// A Prometheus query, as Grafana's Prometheus data source stores it.
export interface PromQuery extends schema.DataQuery {
  expr: string;
  legendFormat?: string;
  instant?: boolean;
  range?: boolean;
  format?: "time_series" | "table" | "heatmap";
  editorMode?: "code" | "builder";
  interval?: string;
  exemplar?: boolean;
}

type FieldConfigSource<Custom> = Omit<schema.FieldConfigSource, "defaults"> & {
  defaults: Omit<schema.FieldConfig, "custom"> & { custom?: Custom };
};

type Typed<Type extends string, Options, Custom> = Omit<
  schema.Panel,
  "type" | "options" | "targets" | "fieldConfig"
> & {
  type: Type;
  options: Options;
  fieldConfig: FieldConfigSource<Custom>;
  targets: PromQuery[];
};

export type PerfPanel =
  | Typed<"timeseries", TimeSeries.Options, TimeSeries.FieldConfig>
  | Typed<"stat", Stat.Options, never>
  | Typed<"bargauge", BarGauge.Options, never>
  | Typed<"table", Table.Options, Table.FieldConfig>;

export type PerfRow = Omit<schema.RowPanel, "panels"> & { panels: PerfPanel[] };

export type PerfDashboard = Json<
  Omit<schema.Dashboard, "panels"> & { panels: Array<PerfPanel | PerfRow> }
>;
