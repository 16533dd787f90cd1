ALTER TABLE "supplier_offer_observations" ALTER COLUMN "price" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "supplier_offers" ALTER COLUMN "price" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "supplier_offer_observations" ADD COLUMN "attributes" jsonb;--> statement-breakpoint
ALTER TABLE "supplier_offers" ADD COLUMN "attributes" jsonb;