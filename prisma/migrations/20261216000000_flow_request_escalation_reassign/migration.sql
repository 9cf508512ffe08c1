-- AlterTable
ALTER TABLE "FlowRequest" ADD COLUMN     "escalatedAt" TIMESTAMP(3),
ADD COLUMN     "escalatedTo" TEXT,
ADD COLUMN     "reassignReason" TEXT,
ADD COLUMN     "reassignedAt" TIMESTAMP(3),
ADD COLUMN     "reassignedBy" TEXT,
ADD COLUMN     "reassignedTo" TEXT;

