import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./internal/store/schema.ts",
  out: "./drizzle",
});
